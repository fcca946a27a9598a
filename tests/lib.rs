//! Shared support for the workspace-level suites: start the real `slotraft` binary
//! on an ephemeral loopback port, talk to it with raw RESP, and clean up.

pub mod support;
