//! Workspace-level integration suites live in the test targets.
