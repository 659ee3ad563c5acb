//! `kubenest-hub`: the stateless WebSocket router between cluster agents and the management
//! controllers.
