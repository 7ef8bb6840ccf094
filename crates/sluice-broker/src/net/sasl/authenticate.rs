//! SaslAuthenticate (key 36), v0-2: one SASL token each way (KIP-152), after SaslHandshake
//! v1.
//!
//! Answered by the connection's SASL gate ([`crate::net::sasl::Session`]), in arrival order. A
//! failed authentication answers SASL_AUTHENTICATION_FAILED (58) with a message and closes the
//! connection after the answer; v1+ carries the session lifetime (`connections.max.reauth.ms`,
//! KIP-368) once authenticated.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use sluice_protocol::codec;
use sluice_protocol::header::Request;

use crate::handlers::{self, str_bytes, Reply};
use crate::net::sasl::{Gate, Session};
use crate::Broker;

pub(crate) fn handle(session: &mut Session, broker: &Broker, req: Request) -> Gate {
    let version = req.header.request_api_version;
    let mut body = req.body;
    let Ok(r) = codec::decode_request::<SaslAuthenticateRequest>(&mut body, version) else {
        crate::log_limit::warn_limited!(
            crate::log_limit::MALFORMED_REQUEST,
            "malformed SaslAuthenticate; closing connection"
        );
        return Gate::Answered(Reply::Close, false);
    };
    let failure = session.failure_message();
    let mut resp = SaslAuthenticateResponse::default();
    let keep = match session.step(broker, &r.auth_bytes) {
        Ok((token, done)) => {
            resp.auth_bytes = Bytes::from(token);
            if done && version >= 1 {
                resp.session_lifetime_ms = session.session_lifetime_ms();
            }
            true
        }
        Err(why) => {
            crate::log_limit::info_limited!(crate::log_limit::SASL_FAILED, peer = %session.peer, error = %why, "SASL authentication failed; closing connection");
            resp.error_code = ResponseError::SaslAuthenticationFailed.code();
            resp.error_message = Some(str_bytes(failure));
            false
        }
    };
    let reply = handlers::encode(req.api_key, version, req.header.correlation_id, &resp);
    let keep = keep && matches!(reply, Reply::Frame { .. });
    Gate::Answered(reply, keep)
}
