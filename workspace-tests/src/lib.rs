//! Nothing here: the crate exists for its tests (`tests/`), which read the repository around it.
