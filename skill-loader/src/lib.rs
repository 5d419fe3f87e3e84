//! Scoped reads of skill bodies and resources.
