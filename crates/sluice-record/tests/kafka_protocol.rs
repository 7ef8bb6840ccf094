//! The model against an independent implementation: batches encoded by kafka-protocol's
//! `RecordBatchEncoder` read back field for field through `BatchHeader`, and batches this
//! crate writes or rewrites decode with its `RecordBatchDecoder` (which checks the CRC-32C)
//! into the fields that were set. If a position, a width, an attribute bit or the CRC's
//! range were wrong here, one of these would fail.

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{
    Compression as KafkaCompression, Record, RecordBatchDecoder, RecordBatchEncoder,
    RecordEncodeOptions, TimestampType as KafkaTimestampType,
};
use sluice_record::{
    compute_crc, Attributes, BatchFields, BatchHeader, BatchHeaderMut, Compression, Offset,
    ProducerEpoch, ProducerId, TimestampType, HEADER_LEN, MAGIC_V2,
};

/// Knobs of one encoded batch.
#[derive(Debug, Clone, Copy)]
struct Case {
    compression: KafkaCompression,
    transactional: bool,
    control: bool,
    delete_horizon: bool,
    log_append_time: bool,
    producer_id: i64,
}

const PLAIN: Case = Case {
    compression: KafkaCompression::None,
    transactional: false,
    control: false,
    delete_horizon: false,
    log_append_time: false,
    producer_id: -1,
};

fn records(case: Case) -> Vec<Record> {
    (0..3)
        .map(|i| Record {
            transactional: case.transactional,
            control: case.control,
            delete_horizon: case.delete_horizon,
            partition_leader_epoch: 9,
            producer_id: case.producer_id,
            producer_epoch: 4,
            timestamp_type: timestamp_type(case),
            offset: 1000 + i,
            sequence: 70 + i as i32,
            timestamp: 5_000 + 10 * i,
            key: Some(Bytes::from(format!("key-{i}"))),
            value: Some(Bytes::from(vec![b'v'; 20])),
            headers: IndexMap::new(),
        })
        .collect()
}

fn encode(case: Case) -> Vec<u8> {
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: case.compression,
    };
    RecordBatchEncoder::encode(&mut buf, &records(case), &options).expect("encode");
    buf.to_vec()
}

fn decode(batch: &[u8]) -> Vec<Record> {
    let mut buf = Bytes::copy_from_slice(batch);
    RecordBatchDecoder::decode(&mut buf)
        .expect("kafka-protocol decodes it")
        .records
}

#[test]
fn a_kafka_protocol_batch_reads_back_through_the_view() {
    // Goal: every header field of a batch kafka-protocol encoded reads back as encoded.
    let batch = encode(Case {
        producer_id: 123_456_789_012,
        ..PLAIN
    });
    let header = BatchHeader::parse(&batch).expect("61 bytes");
    assert_eq!(header.base_offset(), Offset(1000));
    assert_eq!(header.total_size(), Some(batch.len()));
    assert_eq!(header.batch_length() as usize, batch.len() - 12);
    assert_eq!(header.partition_leader_epoch(), 9);
    assert_eq!(header.magic(), MAGIC_V2);
    assert_eq!(header.crc(), compute_crc(&batch));
    assert_eq!(header.attributes(), Attributes(0));
    assert_eq!(header.last_offset_delta(), 2);
    assert_eq!(header.last_offset(), Offset(1002));
    assert_eq!(header.base_timestamp(), 5_000);
    assert_eq!(header.max_timestamp(), 5_020);
    assert_eq!(header.producer_id(), ProducerId(123_456_789_012));
    assert_eq!(header.producer_epoch(), ProducerEpoch(4));
    assert_eq!(header.base_sequence(), 70);
    assert_eq!(header.records_count(), 3);
    let prefix = header.prefix();
    assert_eq!(
        (prefix.base_offset(), prefix.magic(), prefix.crc()),
        (Offset(1000), MAGIC_V2, header.crc())
    );
}

#[test]
fn every_attribute_bit_agrees_with_kafka_protocol() {
    // Goal: each attribute flag (timestamp type, transactional, control, delete horizon) is
    // that bit alone in the view of a batch kafka-protocol encoded with it, and a batch
    // written here with that bit decodes in kafka-protocol with that property and no other.
    // (kafka-protocol's encoder never sets the LogAppendTime bit, so that case is a batch
    // it encoded with the bit then set here.)
    let cases = [
        (
            Case {
                transactional: true,
                ..PLAIN
            },
            Attributes::TRANSACTIONAL,
        ),
        (
            Case {
                control: true,
                ..PLAIN
            },
            Attributes::CONTROL,
        ),
        (
            Case {
                delete_horizon: true,
                ..PLAIN
            },
            Attributes::DELETE_HORIZON,
        ),
        (
            Case {
                log_append_time: true,
                ..PLAIN
            },
            Attributes::LOG_APPEND_TIME,
        ),
    ];
    for (case, flag) in cases {
        let mut encoded = encode(case);
        if case.log_append_time {
            let mut view = BatchHeaderMut::new(&mut encoded).unwrap();
            view.set_attributes(view.header().attributes().with(flag));
            view.update_crc();
        }
        assert_eq!(decode(&encoded)[0].timestamp_type, timestamp_type(case));
        let header = BatchHeader::parse(&encoded).unwrap();
        assert_eq!(header.attributes(), flag, "{case:?}");
        assert_eq!(header.is_transactional(), case.transactional);
        assert_eq!(header.is_control(), case.control);
        assert_eq!(header.is_log_append_time(), case.log_append_time);
        assert_eq!(header.delete_horizon_ms().is_some(), case.delete_horizon);
        let expected_type = match case.log_append_time {
            true => TimestampType::LogAppendTime,
            false => TimestampType::CreateTime,
        };
        assert_eq!(header.attributes().timestamp_type(), expected_type);

        let ours = BatchFields {
            attributes: flag,
            ..BatchFields::default()
        }
        .to_batch(&[]);
        let info = decode_info(&ours);
        assert_eq!(info.transactional, case.transactional, "{case:?}");
        assert_eq!(info.control, case.control);
        assert_eq!(info.delete_horizon, case.delete_horizon);
        assert_eq!(info.timestamp_type, timestamp_type(case));
    }
}

fn timestamp_type(case: Case) -> KafkaTimestampType {
    match case.log_append_time {
        true => KafkaTimestampType::LogAppend,
        false => KafkaTimestampType::Creation,
    }
}

fn decode_info(batch: &[u8]) -> kafka_protocol::records::BatchDecodeInfo {
    let mut buf = Bytes::copy_from_slice(batch);
    let mut infos = RecordBatchDecoder::decode_batch_info(&mut buf).expect("header decodes");
    assert_eq!(infos.len(), 1);
    infos.remove(0)
}

#[test]
fn codec_ids_agree_with_kafka_protocol() {
    // Goal: the codec id kafka-protocol writes is the one the view names, for every codec;
    // the records it compressed decode unchanged, and the codec bits are the only bits set.
    let codecs = [
        (KafkaCompression::None, Compression::None),
        (KafkaCompression::Gzip, Compression::Gzip),
        (KafkaCompression::Snappy, Compression::Snappy),
        (KafkaCompression::Lz4, Compression::Lz4),
        (KafkaCompression::Zstd, Compression::Zstd),
    ];
    for (theirs, ours) in codecs {
        let case = Case {
            compression: theirs,
            ..PLAIN
        };
        let batch = encode(case);
        let header = BatchHeader::parse(&batch).unwrap();
        assert_eq!(header.attributes().compression(), Some(ours), "{theirs:?}");
        assert_eq!(header.attributes(), Attributes(ours.id()));
        assert_eq!(header.crc(), compute_crc(&batch));
        assert_eq!(decode(&batch), records(case));
        let written = BatchFields {
            attributes: Attributes(0).with_compression(ours),
            ..BatchFields::default()
        }
        .to_batch(&[]);
        assert_eq!(decode_info(&written).compression, theirs);
    }
}

#[test]
fn fields_written_here_decode_in_kafka_protocol() {
    // Goal: a batch written by BatchFields around kafka-protocol's own record bytes decodes
    // there with the producer fields, offsets, epoch and timestamps that were set.
    let case = Case {
        transactional: true,
        producer_id: 77,
        ..PLAIN
    };
    let reference = encode(case);
    let header = BatchHeader::parse(&reference).unwrap();
    let rewritten = BatchFields::of(&header).to_batch(&reference[HEADER_LEN..]);
    assert_eq!(rewritten, reference, "the same bytes, CRC included");

    let fields = BatchFields {
        base_offset: Offset(1 << 33),
        partition_leader_epoch: 12,
        producer_id: ProducerId(88),
        producer_epoch: ProducerEpoch(5),
        base_sequence: 300,
        ..BatchFields::of(&header)
    };
    let decoded = decode(&fields.to_batch(&reference[HEADER_LEN..]));
    assert_eq!(decoded.len(), 3);
    for (i, record) in decoded.iter().enumerate() {
        assert_eq!(record.offset, (1 << 33) + i as i64);
        assert_eq!(record.sequence, 300 + i as i32);
        assert_eq!((record.producer_id, record.producer_epoch), (88, 5));
        assert_eq!(record.partition_leader_epoch, 12);
        assert!(record.transactional);
        assert_eq!(record.timestamp, 5_000 + 10 * i as i64);
    }
}

#[test]
fn a_rewritten_batch_has_its_crc_recomputed() {
    // Goal: after fields change in place, kafka-protocol (which checks the CRC-32C) refuses
    // the batch until update_crc has run, then decodes it with the new values; the base
    // offset alone needs no new CRC.
    let mut batch = encode(PLAIN);
    BatchHeaderMut::new(&mut batch)
        .unwrap()
        .set_base_offset(Offset(50));
    assert_eq!(decode(&batch)[0].offset, 50, "no new CRC needed");
    let mut view = BatchHeaderMut::new(&mut batch).unwrap();
    view.set_base_timestamp(9_000);
    view.set_attributes(Attributes::LOG_APPEND_TIME);
    let mut stale = Bytes::copy_from_slice(&batch);
    assert!(
        RecordBatchDecoder::decode(&mut stale).is_err(),
        "CRC now stale"
    );
    BatchHeaderMut::new(&mut batch).unwrap().update_crc();
    let decoded = decode(&batch);
    assert_eq!(decoded.len(), 3);
    for (i, record) in decoded.iter().enumerate() {
        assert_eq!(record.timestamp, 9_000 + 10 * i as i64);
        assert_eq!(record.timestamp_type, KafkaTimestampType::LogAppend);
    }
}
