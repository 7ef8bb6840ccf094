//! A bound listener (`listeners`): its socket's address, security protocol, advertised
//! address and the TLS and SASL settings its connections are served with. The settings' text
//! (names, addresses, advertised entries) is parsed in [`crate::config::listeners`].

use std::net::SocketAddr;
use std::sync::Arc;

use crate::config::security::SecurityProtocol;
use crate::net::sasl::SaslConfig;
use crate::net::tls::Tls;

/// A bound listener: what connections through it are served with.
#[derive(Debug)]
pub struct Listener {
    pub name: String,
    pub protocol: SecurityProtocol,
    pub local: SocketAddr,
    /// Host and port given to clients connected through this listener.
    pub advertised_host: String,
    pub advertised_port: i32,
    /// The TLS server settings (SSL and SASL_SSL listeners).
    pub tls: Option<Arc<Tls>>,
    /// The SASL mechanisms and PLAIN users (SASL_PLAINTEXT and SASL_SSL listeners).
    pub sasl: Option<Arc<SaslConfig>>,
}
