//! RoCE v2 wire formats (in progress).
