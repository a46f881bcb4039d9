//! Latency tests.
