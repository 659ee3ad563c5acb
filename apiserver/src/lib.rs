//! `kubenest-apiserver`: the REST facade and live event stream over the management cluster.
