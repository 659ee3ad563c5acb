//! `kubenest-agent`: the per-cluster operator that dials out to the hub and applies workloads.
