"""The Iceberg target of the commit protocol.

- ``target.py``: ``IcebergTarget``, what the ``FilesCommitter`` calls for an Iceberg table;
- ``staging.py``: phase 1, a batch's files in staging manifests, the state holding only
  their ``StagedManifests``;
- ``table_commit.py``: phase 2, one snapshot per commit group, stamped with the watermark
  inside the commit;
- ``watermark.py``: the snapshot summary keys and the committed watermark read back.

Only this package (of ``commit/``) imports Iceberg's table modules.
"""
