//! Running a perf test: devices, the out-of-band protocol, the measurement, the report.
