//! The local backend: a virtual cluster of processor slots on this machine (the embedded
//! default). Being written.
