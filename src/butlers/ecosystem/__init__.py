"""A whole roster on one machine: the machinery behind `butlers up` and the e2e harness."""
