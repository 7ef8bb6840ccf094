//! DeleteTopics (key 20), v1-6: by name, or by topic id (v6+).

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use uuid::Uuid;

use super::{str_bytes, Ctx, Reply};
use crate::services::acl;

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: DeleteTopicsRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    // v6 lists (name or id); earlier versions list names.
    let wanted: Vec<(Option<String>, Uuid)> = if ctx.version >= 6 {
        req.topics
            .into_iter()
            .map(|t| (t.name.map(|n| n.0.to_string()), t.topic_id))
            .collect()
    } else {
        req.topic_names
            .into_iter()
            .map(|n| (Some(n.0.to_string()), Uuid::nil()))
            .collect()
    };
    let who = ctx.who();
    ctx.respond_blocking(move |b| {
        let mut resp = DeleteTopicsResponse::default();
        for (name, id) in wanted {
            let topic = match &name {
                Some(n) => b.topics.get(n),
                None => b.topics.get_by_id(id),
            };
            let mut r = DeletableTopicResult::default();
            r.name = name.clone().map(|n| TopicName(str_bytes(n)));
            r.topic_id = id;
            let internal = name
                .as_deref()
                .and_then(|n| crate::services::topics::internal_topic_refusal(n, "delete"));
            // Kafka checks DELETE before existence (by name); by id, an unknown id is told.
            let checked = topic.as_ref().map(|t| &*t.name).or(name.as_deref());
            if checked.is_some_and(|n| !who.allowed(b, acl::op::DELETE, acl::resource::TOPIC, n)) {
                r.error_code = ResponseError::TopicAuthorizationFailed.code();
                r.error_message = Some(str_bytes("Authorization failed."));
                resp.responses.push(r);
                continue;
            }
            match (topic, internal) {
                (None, Some(refusal)) => {
                    r.error_code = refusal.code;
                    r.error_message = Some(str_bytes(refusal.message));
                }
                (None, None) => {
                    r.error_code = if name.is_some() {
                        ResponseError::UnknownTopicOrPartition.code()
                    } else {
                        ResponseError::UnknownTopicId.code()
                    };
                    r.error_message = Some(str_bytes("This server does not host this topic."));
                }
                (Some(t), _) => {
                    r.name = Some(TopicName(str_bytes(t.name.to_string())));
                    r.topic_id = t.id;
                    if let Err(e) = b.topics.delete(&t, &b.log) {
                        r.error_code = e.code;
                        r.error_message = Some(str_bytes(e.message));
                    }
                }
            }
            resp.responses.push(r);
        }
        resp
    })
    .await
}
