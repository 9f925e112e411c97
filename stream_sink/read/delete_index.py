"""Which delete files apply to which data file: see :mod:`stream_sink.table.delete_index`
(the index lives in the table layer, where commits validate against it too)."""

from stream_sink.table.delete_index import POS_FILE_PATH_ID, POS_POS_ID, DeleteIndex

__all__ = ["POS_FILE_PATH_ID", "POS_POS_ID", "DeleteIndex"]
