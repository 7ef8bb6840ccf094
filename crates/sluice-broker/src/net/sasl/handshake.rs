//! SaslHandshake (key 17), v0-1: the client names the SASL mechanism it will use.
//!
//! Answered by the connection's SASL gate ([`crate::net::sasl::Session`]), not routed as a task:
//! it changes the connection's authentication state, in arrival order. v0 means raw SASL
//! tokens follow; v1 means they come in SaslAuthenticate requests. A mechanism the listener
//! does not enable gets UNSUPPORTED_SASL_MECHANISM with the enabled list, and the
//! connection closes after the answer (as Kafka does); a handshake on a listener without
//! SASL, or out of order, gets ILLEGAL_SASL_STATE.

use kafka_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};
use sluice_protocol::codec;
use sluice_protocol::header::Request;

use crate::handlers::{self, str_bytes, Reply};
use crate::net::sasl::{Gate, Session};

pub(crate) fn handle(session: &mut Session, req: Request) -> Gate {
    let version = req.header.request_api_version;
    let mut body = req.body;
    let Ok(r) = codec::decode_request::<SaslHandshakeRequest>(&mut body, version) else {
        crate::log_limit::warn_limited!(
            crate::log_limit::MALFORMED_REQUEST,
            "malformed SaslHandshake; closing connection"
        );
        return Gate::Answered(Reply::Close, false);
    };
    let (error_code, mechanisms, keep) = session.handshake(version, r.mechanism.as_str());
    let mut resp = SaslHandshakeResponse::default();
    resp.error_code = error_code;
    resp.mechanisms = mechanisms.into_iter().map(str_bytes).collect();
    let reply = handlers::encode(req.api_key, version, req.header.correlation_id, &resp);
    let keep = keep && matches!(reply, Reply::Frame { .. });
    Gate::Answered(reply, keep)
}
