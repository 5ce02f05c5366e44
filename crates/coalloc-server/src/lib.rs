//! The coalloc server. Being written.
