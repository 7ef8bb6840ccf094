// TxnV2: transactional scenarios of the Java client that tests/integration/test_txn_v2.py runs
// against Sluice with Transactions V2 finalized (KIP-890 part 2), so the client sends no
// AddPartitionsToTxn / AddOffsetsToTxn and ends every transaction with EndTxn v5.
//
//   TxnV2 zombie  --bootstrap HOST:PORT --topic T --transactional-id ID [--count N]
//       A producer opens a transaction and sends N records; a second producer with the same
//       transactional id initializes (fencing the first), sends N records and commits; the
//       first then tries to send and commit. Prints what each got.
//   TxnV2 copy    --bootstrap HOST:PORT --input I --output O --group G --transactional-id ID
//                 [--count N]
//       Consume-transform-produce: reads N records of I with group G (read_committed), writes
//       each to O and commits the consumed offsets with sendOffsetsToTransaction, in one
//       transaction per poll; prints how many were copied.
//
// Every command prints one JSON result line last on stdout, as SluiceClient does.

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class TxnV2 {

    public static void main(String[] argv) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("command", argv.length > 0 ? argv[0] : "");
        int rc;
        try {
            SluiceClient.Opts o = new SluiceClient.Opts(argv);
            boolean ok;
            switch (argv[0]) {
                case "zombie": ok = zombie(o, out); break;
                case "copy": ok = copy(o, out); break;
                default: throw new IllegalArgumentException("unknown command " + argv[0]);
            }
            out.put("ok", ok);
            rc = ok ? 0 : 2;
        } catch (Throwable t) {
            out.put("ok", false);
            out.put("error", t.toString());
            t.printStackTrace();
            rc = 2;
        }
        System.out.println(SluiceClient.Json.write(out));
        System.out.flush();
        System.exit(rc);
    }

    static Properties producerProps(SluiceClient.Opts o, String transactionalId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, o.req("bootstrap"));
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "20000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        o.applyConf(p);
        return p;
    }

    /** The exception's class and the class of its root cause, for the test to judge. */
    static String describe(Throwable t) {
        Throwable root = t;
        while (root.getCause() != null && root.getCause() != root) root = root.getCause();
        return t.getClass().getSimpleName() + " / " + root.getClass().getSimpleName();
    }

    static boolean zombie(SluiceClient.Opts o, Map<String, Object> out) throws Exception {
        String topic = o.req("topic");
        String id = o.req("transactional-id");
        int count = o.intOpt("count", 5);
        KafkaProducer<byte[], String> zombie = new KafkaProducer<>(producerProps(o, id));
        try {
            zombie.initTransactions();
            zombie.beginTransaction();
            for (int i = 0; i < count; i++) {
                zombie.send(new ProducerRecord<>(topic, 0, null, String.format("zombie-%03d", i)));
            }
            zombie.flush();
            try (KafkaProducer<byte[], String> live = new KafkaProducer<>(producerProps(o, id))) {
                live.initTransactions();
                live.beginTransaction();
                for (int i = 0; i < count; i++) {
                    live.send(new ProducerRecord<>(topic, 0, null, String.format("live-%03d", i)));
                }
                live.commitTransaction();
                out.put("live", "committed");
            }
            String zombieResult;
            try {
                zombie.send(new ProducerRecord<>(topic, 0, null, "zombie-late")).get();
                zombie.commitTransaction();
                zombieResult = "committed";
            } catch (Exception e) {
                zombieResult = describe(e);
            }
            out.put("zombie", zombieResult);
        } finally {
            zombie.close(Duration.ofSeconds(5));
        }
        return "committed".equals(out.get("live"));
    }

    static boolean copy(SluiceClient.Opts o, Map<String, Object> out) throws Exception {
        int count = o.intOpt("count", 10);
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, o.req("bootstrap"));
        c.put(ConsumerConfig.GROUP_ID_CONFIG, o.req("group"));
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        int copied = 0;
        int transactions = 0;
        List<String> output = new ArrayList<>();
        try (KafkaConsumer<byte[], String> consumer = new KafkaConsumer<>(c);
             KafkaProducer<byte[], String> producer =
                 new KafkaProducer<>(producerProps(o, o.req("transactional-id")))) {
            producer.initTransactions();
            consumer.subscribe(List.of(o.req("input")));
            long deadline = System.currentTimeMillis() + 60_000;
            while (copied < count && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], String> records = consumer.poll(Duration.ofMillis(500));
                if (records.isEmpty()) continue;
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], String> r : records) {
                    String value = "copy-" + r.value();
                    producer.send(new ProducerRecord<>(o.req("output"), r.partition(), null, value));
                    output.add(value);
                    offsets.put(new TopicPartition(r.topic(), r.partition()),
                                new OffsetAndMetadata(r.offset() + 1));
                    copied++;
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                producer.commitTransaction();
                transactions++;
            }
        }
        out.put("copied", copied);
        out.put("transactions", transactions);
        return copied == count;
    }
}
