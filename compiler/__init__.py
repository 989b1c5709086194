"""Driving the compiler: pass pipelines, XLA compilation and execution."""
