"""Bitmaps shared by the table formats (Roaring, portable layout)."""
