//! The report: the JSON document (`schema`, documented in docs/bench-schema.md, additive
//! only), built from a run's `RunData` (`build`), and printed for people with the flat metric
//! map that gates read (`human`). Everything here is derived from `RunData`; nothing is
//! measured here.

mod build;
mod human;
mod schema;

pub use self::build::{attach_ceiling, build, command_line};
pub use self::human::{
    calibration_lines, client_configs_text, gate_lines, replication_factor_text, topic_configs_text,
};
pub use self::schema::*;
