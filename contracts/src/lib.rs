//! The hub envelope and every command, status and control payload that crosses the hub, with
//! their JSON Schemas. No IO: the hub, the agent and the controllers build and read frames only
//! through these types.
