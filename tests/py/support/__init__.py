"""What the tests share: the oracles, the golden programs and their stores, the
random programs, the recorded cases, and the child processes tests run pmapc in
(tests/README.md lists them)."""
