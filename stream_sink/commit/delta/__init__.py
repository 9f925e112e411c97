"""The Delta Lake target of the commit protocol (``target.py``: ``DeltaTarget``): staged
add and remove actions, committed with a ``txn`` action that holds the watermark.

Only this package (of ``commit/``) imports Delta Lake's modules.
"""
