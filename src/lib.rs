//! Workspace-level examples (`examples/`) and tests (`tests/`) for cai.
//!
//! This package is never published: it only gives the demo, the trybuild UI suite and the
//! integration tests a home that depends on `cai-runtime` the way a user's crate would.
