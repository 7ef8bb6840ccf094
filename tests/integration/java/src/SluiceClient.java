// The Java client family of Sluice's integration suite: a few subcommands around the
// official Apache Kafka client (kafka-clients 4.x), each printing one JSON line of results on
// stdout, last (consume-group prints rebalance events before it, as JSON lines with an
// "event" key); logs go to stderr. Exit code 0 when the command did what it was asked, 2 when it
// failed (the JSON line then carries "ok": false and "error").
//
//   produce        --bootstrap B --topic T --count N [--start S] [--prefix seq-]
//                  [--partition P | --partitions K] [--conf k=v]...
//       KafkaProducer with the client's defaults (idempotent, acks=all). Record i gets the
//       value prefix + %06d of S+i, and goes to partition P, or (S+i) % K, or wherever the
//       default partitioner puts it.
//   consume-group  --bootstrap B --topic T --group G [--protocol classic|consumer]
//                  [--count N] [--extra-ms E] [--per-partition-limit L] [--timeout-ms T]
//                  [--stop-on-stdin] [--client-id C] [--conf k=v]...
//       KafkaConsumer.subscribe with group.protocol; after every poll it commits (commitSync)
//       the offsets of the records it processed. Stops E ms after N records were processed,
//       at the deadline, or (with --stop-on-stdin) when stdin says "stop" or closes. With
//       L, only the first L records of each partition are processed (the rest are skipped
//       and the partition paused), so the committed offset of each partition is L.
//   consume-regex  --bootstrap B --regex R --group G [--count N] [--extra-ms E]
//                  [--timeout-ms T] [--stop-on-stdin] [--conf k=v]...
//       KafkaConsumer.subscribe(SubscriptionPattern) with group.protocol=consumer: the broker
//       resolves the RE2 regex (KIP-848). Rebalance events name "topic-partition"s; records
//       are [topic, partition, offset, value]; commitSync after every poll. Stops as
//       consume-group does.
//   txn-produce    --bootstrap B --topic T --transactional-id X --rounds commit,abort,...
//                  [--count N] [--partitions P] [--conf k=v]...
//       A transactional KafkaProducer: initTransactions, then per round beginTransaction, N
//       records "r<round>-<i>" spread over P partitions, flush, and commitTransaction or
//       abortTransaction as the round says. Reports the rounds done and the producer's
//       transactional state errors, if any.
//   admin-describe --bootstrap B --group G [--wait-members N --wait-partitions P]
//                  [--timeout-ms T]
//       Admin.describeConsumerGroups (waiting, when asked, until N members hold P distinct
//       partitions between them), Admin.listConsumerGroupOffsets and Admin.listGroups.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class SluiceClient {

    public static void main(String[] argv) {
        if (argv.length == 0) {
            System.err.println("usage: SluiceClient produce|consume-group|admin-describe --bootstrap HOST:PORT ...");
            System.exit(64);
        }
        String cmd = argv[0];
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("command", cmd);
        int rc;
        try {
            Opts o = new Opts(argv);
            boolean ok;
            switch (cmd) {
                case "produce": ok = produce(o, out); break;
                case "txn-produce": ok = txnProduce(o, out); break;
                case "consume-group": ok = consumeGroup(o, out); break;
                case "consume-regex": ok = consumeRegex(o, out); break;
                case "admin-describe": ok = adminDescribe(o, out); break;
                default: throw new IllegalArgumentException("unknown command " + cmd);
            }
            out.put("ok", ok);
            rc = ok ? 0 : 2;
        } catch (Throwable t) {
            Throwable root = t;
            while (root.getCause() != null && root.getCause() != root) root = root.getCause();
            out.put("ok", false);
            out.put("error", t.toString());
            out.put("error_root", root.toString());
            t.printStackTrace();
            rc = 2;
        }
        System.out.println(Json.write(out));
        System.out.flush();
        System.exit(rc);
    }

    // ---------------------------------------------------------------------------------------
    // txn-produce
    // ---------------------------------------------------------------------------------------
    static boolean txnProduce(Opts o, Map<String, Object> out) throws Exception {
        String topic = o.req("topic");
        int count = o.intOpt("count", 10);
        int partitions = o.intOpt("partitions", 1);
        String[] rounds = o.req("rounds").split(",");
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, o.req("bootstrap"));
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, o.req("transactional-id"));
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000");
        o.applyConf(p);
        List<Object> done = new ArrayList<>();
        try (KafkaProducer<byte[], String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            for (int r = 0; r < rounds.length; r++) {
                producer.beginTransaction();
                for (int i = 0; i < count; i++) {
                    String value = String.format("r%d-%06d", r, i);
                    producer.send(new ProducerRecord<>(topic, i % partitions, null, value));
                }
                producer.flush();
                switch (rounds[r]) {
                    case "commit": producer.commitTransaction(); break;
                    case "abort": producer.abortTransaction(); break;
                    default: throw new IllegalArgumentException("round must be commit or abort: " + rounds[r]);
                }
                done.add(rounds[r]);
            }
        }
        out.put("rounds", done);
        return done.size() == rounds.length;
    }

    // ---------------------------------------------------------------------------------------
    // produce
    // ---------------------------------------------------------------------------------------
    static boolean produce(Opts o, Map<String, Object> out) throws Exception {
        String topic = o.req("topic");
        int count = o.intOpt("count", 1);
        int start = o.intOpt("start", 0);
        String prefix = o.str("prefix", "seq-");
        Integer fixedPartition = o.has("partition") ? o.intOpt("partition", 0) : null;
        int spread = o.intOpt("partitions", 0);

        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, o.req("bootstrap"));
        p.put(ProducerConfig.CLIENT_ID_CONFIG, o.str("client-id", "sluice-java-producer"));
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        // Harness-only: a missing topic or partition fails within seconds instead of blocking
        // every send for a minute. Idempotence, acks, retries and batching keep their defaults.
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000");
        o.applyConf(p);
        // What the client will actually run with (defaults included), to show they are the defaults.
        ProducerConfig effective = new ProducerConfig(p);
        out.put("topic", topic);
        out.put("enable_idempotence", effective.getBoolean(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG));
        out.put("acks", effective.getString(ProducerConfig.ACKS_CONFIG));

        long t0 = System.nanoTime();
        long[][] acked = new long[count][];
        String[] failed = new String[count];
        AtomicInteger errors = new AtomicInteger();
        try (KafkaProducer<byte[], String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                int n = start + i;
                Integer part = fixedPartition != null ? fixedPartition : (spread > 0 ? n % spread : null);
                String value = String.format("%s%06d", prefix, n);
                final int idx = i;
                if (errors.get() > 0) break; // the first failure decides; do not wait out the rest
                producer.send(new ProducerRecord<>(topic, part, null, value), (md, e) -> {
                    if (e != null) {
                        failed[idx] = e.toString();
                        errors.incrementAndGet();
                    } else {
                        acked[idx] = new long[] {md.partition(), md.offset()};
                    }
                });
            }
            producer.flush();
        }
        List<Object> results = new ArrayList<>(count);
        List<Object> errorList = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            results.add(acked[i] == null ? null : List.of(acked[i][0], acked[i][1]));
            if (failed[i] != null && errorList.size() < 10) errorList.add("record " + i + ": " + failed[i]);
        }
        out.put("count", count);
        out.put("results", results);
        out.put("error_count", errors.get());
        out.put("errors", errorList);
        out.put("elapsed_ms", (System.nanoTime() - t0) / 1_000_000);
        return errors.get() == 0;
    }

    // ---------------------------------------------------------------------------------------
    // consume-group
    // ---------------------------------------------------------------------------------------
    static boolean consumeGroup(Opts o, Map<String, Object> out) throws Exception {
        String topic = o.req("topic");
        String group = o.req("group");
        String protocol = o.str("protocol", "classic");
        int count = o.intOpt("count", 0);
        long extraMs = o.intOpt("extra-ms", 1000);
        int limit = o.intOpt("per-partition-limit", 0);
        long deadline = System.currentTimeMillis() + o.intOpt("timeout-ms", 60000);

        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, o.req("bootstrap"));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, o.str("client-id", "sluice-java-consumer"));
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        o.applyConf(p);
        out.put("topic", topic);
        out.put("group", group);
        out.put("group_protocol", protocol);

        StopFlag stop = new StopFlag();
        if (o.has("stop-on-stdin")) stop.watchStdin();

        List<Object> records = new ArrayList<>();
        List<Object> events = new ArrayList<>();
        Map<Integer, Integer> perPartition = new HashMap<>();
        int commits = 0;
        List<Object> commitFailures = new ArrayList<>();
        boolean reachedCount = false;
        out.put("records", records);
        out.put("events", events);
        try (KafkaConsumer<byte[], String> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    event("revoked", parts);
                }
                @Override public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    event("assigned", parts);
                }
                @Override public void onPartitionsLost(Collection<TopicPartition> parts) {
                    event("lost", parts);
                }
                private void event(String what, Collection<TopicPartition> parts) {
                    // Printed as it happens, so a test can wait for a group to settle.
                    Map<String, Object> e = new LinkedHashMap<>();
                    e.put("event", what);
                    e.put("partitions", partitions(parts));
                    e.put("assignment", partitions(consumer.assignment()));
                    events.add(e);
                    System.out.println(Json.write(e));
                    System.out.flush();
                }
            });
            long reachedAt = -1;
            while (!stop.stopped() && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], String> batch = consumer.poll(Duration.ofMillis(200));
                Map<TopicPartition, OffsetAndMetadata> processed = new HashMap<>();
                Set<TopicPartition> full = new HashSet<>();
                for (ConsumerRecord<byte[], String> r : batch) {
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    int seen = perPartition.getOrDefault(r.partition(), 0);
                    if (limit > 0 && seen >= limit) {
                        full.add(tp);
                        continue;
                    }
                    perPartition.put(r.partition(), seen + 1);
                    records.add(List.of(r.partition(), r.offset(), r.value() == null ? "" : r.value()));
                    processed.put(tp, new OffsetAndMetadata(r.offset() + 1));
                }
                if (!full.isEmpty()) consumer.pause(full);
                if (!processed.isEmpty()) {
                    try {
                        consumer.commitSync(processed, Duration.ofSeconds(30));
                        commits++;
                    } catch (org.apache.kafka.common.errors.RetriableException
                             | org.apache.kafka.clients.consumer.CommitFailedException e) {
                        // Counted and reported; a test that expects exactly-once delivery fails on it.
                        commitFailures.add(e.toString());
                    }
                }
                if (count > 0 && records.size() >= count && reachedAt < 0) reachedAt = System.currentTimeMillis();
                if (reachedAt >= 0 && System.currentTimeMillis() - reachedAt >= extraMs) break;
            }
            reachedCount = count > 0 && records.size() >= count;
            Set<TopicPartition> all = new TreeSet<>((a, b) -> a.partition() - b.partition());
            for (PartitionInfo pi : consumer.partitionsFor(topic)) all.add(new TopicPartition(topic, pi.partition()));
            Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(all, Duration.ofSeconds(30));
            Map<String, Object> committedOut = new TreeMap<>();
            for (TopicPartition tp : all) {
                OffsetAndMetadata om = committed.get(tp);
                committedOut.put(Integer.toString(tp.partition()), om == null ? null : om.offset());
            }
            out.put("assignment", partitions(consumer.assignment()));
            out.put("member_id", consumer.groupMetadata().memberId());
            out.put("generation", consumer.groupMetadata().generationId());
            out.put("committed", committedOut);
        } finally {
            out.put("commits", commits);
            out.put("commit_failures", commitFailures);
            out.put("stopped_by_stdin", stop.stopped());
        }
        out.put("count", records.size());
        // Asked for N records: done only if they arrived. Asked to run until stopped: done if stopped.
        return commitFailures.isEmpty() && (count > 0 ? reachedCount : stop.stopped());
    }

    // ---------------------------------------------------------------------------------------
    // consume-regex
    // ---------------------------------------------------------------------------------------
    static boolean consumeRegex(Opts o, Map<String, Object> out) throws Exception {
        String regex = o.req("regex");
        String group = o.req("group");
        int count = o.intOpt("count", 0);
        long extraMs = o.intOpt("extra-ms", 1000);
        long deadline = System.currentTimeMillis() + o.intOpt("timeout-ms", 60000);

        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, o.req("bootstrap"));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, o.str("client-id", "sluice-java-regex"));
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        o.applyConf(p);
        out.put("regex", regex);
        out.put("group", group);

        StopFlag stop = new StopFlag();
        if (o.has("stop-on-stdin")) stop.watchStdin();
        List<Object> records = new ArrayList<>();
        out.put("records", records);
        boolean reachedCount = false;
        try (KafkaConsumer<byte[], String> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(new SubscriptionPattern(regex), new ConsumerRebalanceListener() {
                @Override public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    event("revoked", parts);
                }
                @Override public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    event("assigned", parts);
                }
                @Override public void onPartitionsLost(Collection<TopicPartition> parts) {
                    event("lost", parts);
                }
                private void event(String what, Collection<TopicPartition> parts) {
                    Map<String, Object> e = new LinkedHashMap<>();
                    e.put("event", what);
                    e.put("partitions", topicPartitions(parts));
                    e.put("assignment", topicPartitions(consumer.assignment()));
                    System.out.println(Json.write(e));
                    System.out.flush();
                }
            });
            long reachedAt = -1;
            while (!stop.stopped() && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], String> batch = consumer.poll(Duration.ofMillis(200));
                Map<TopicPartition, OffsetAndMetadata> processed = new HashMap<>();
                for (ConsumerRecord<byte[], String> r : batch) {
                    records.add(List.of(r.topic(), r.partition(), r.offset(), r.value() == null ? "" : r.value()));
                    processed.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                if (!processed.isEmpty()) consumer.commitSync(processed, Duration.ofSeconds(30));
                if (count > 0 && records.size() >= count && reachedAt < 0) reachedAt = System.currentTimeMillis();
                if (reachedAt >= 0 && System.currentTimeMillis() - reachedAt >= extraMs) break;
            }
            reachedCount = count > 0 && records.size() >= count;
            out.put("assignment", topicPartitions(consumer.assignment()));
            out.put("subscription", new ArrayList<>(new TreeSet<>(consumer.subscription())));
        }
        out.put("count", records.size());
        return count > 0 ? reachedCount : stop.stopped();
    }

    static List<String> topicPartitions(Collection<TopicPartition> parts) {
        List<String> out = new ArrayList<>();
        for (TopicPartition tp : parts) out.add(tp.topic() + "-" + tp.partition());
        out.sort(null);
        return out;
    }

    static List<Integer> partitions(Collection<TopicPartition> parts) {
        List<Integer> l = new ArrayList<>();
        for (TopicPartition tp : parts) l.add(tp.partition());
        l.sort(null);
        return l;
    }

    static final class StopFlag {
        private volatile boolean stop;

        boolean stopped() {
            return stop;
        }

        void watchStdin() {
            Thread t = new Thread(() -> {
                try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                    String line;
                    while ((line = in.readLine()) != null) {
                        if (line.trim().equals("stop")) break;
                    }
                } catch (Exception ignored) {
                    // stdin gone: stop as well
                }
                stop = true;
            }, "stdin-watch");
            t.setDaemon(true);
            t.start();
        }
    }

    // ---------------------------------------------------------------------------------------
    // admin-describe
    // ---------------------------------------------------------------------------------------
    static boolean adminDescribe(Opts o, Map<String, Object> out) throws Exception {
        String group = o.req("group");
        int wantMembers = o.intOpt("wait-members", -1);
        int wantPartitions = o.intOpt("wait-partitions", -1);
        long deadline = System.currentTimeMillis() + o.intOpt("timeout-ms", 30000);
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, o.req("bootstrap"));
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "sluice-java-admin");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
        o.applyConf(p);
        out.put("group", group);
        try (Admin admin = Admin.create(p)) {
            boolean settled = false;
            int attempts = 0;
            while (true) {
                attempts++;
                Exception failure = null;
                try {
                    ConsumerGroupDescription d =
                        admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get(15, TimeUnit.SECONDS);
                    settled = describe(d, out, wantMembers, wantPartitions);
                } catch (java.util.concurrent.ExecutionException e) {
                    failure = e;
                }
                boolean waiting = wantMembers >= 0 || wantPartitions >= 0;
                if ((failure == null && (!waiting || settled)) || System.currentTimeMillis() >= deadline) {
                    if (failure != null) throw failure;
                    break;
                }
                Thread.sleep(300);
            }
            out.put("describe_attempts", attempts);
            out.put("settled", settled);

            Map<TopicPartition, OffsetAndMetadata> offsets =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(15, TimeUnit.SECONDS);
            Map<String, Object> offsetsOut = new TreeMap<>();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                offsetsOut.put(e.getKey().toString(), e.getValue() == null ? null : e.getValue().offset());
            }
            out.put("offsets", offsetsOut);

            List<Object> listed = new ArrayList<>();
            for (GroupListing g : admin.listGroups().all().get(15, TimeUnit.SECONDS)) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("group", g.groupId());
                m.put("type", g.type().map(Object::toString).orElse(null));
                m.put("protocol", g.protocol());
                m.put("state", g.groupState().map(Object::toString).orElse(null));
                listed.add(m);
            }
            out.put("listed", listed);
            return (wantMembers < 0 && wantPartitions < 0) || settled;
        }
    }

    /** Puts the description into `out`; true when it matches the wanted member and partition counts. */
    static boolean describe(ConsumerGroupDescription d, Map<String, Object> out, int wantMembers, int wantPartitions) {
        out.put("state", d.groupState().toString());
        out.put("type", d.type().toString());
        out.put("assignor", d.partitionAssignor());
        List<Object> members = new ArrayList<>();
        Set<String> union = new HashSet<>();
        int total = 0;
        for (MemberDescription m : d.members()) {
            List<String> parts = new ArrayList<>();
            for (TopicPartition tp : m.assignment().topicPartitions()) parts.add(tp.toString());
            parts.sort(null);
            union.addAll(parts);
            total += parts.size();
            Map<String, Object> mm = new LinkedHashMap<>();
            mm.put("client_id", m.clientId());
            mm.put("member_id", m.consumerId());
            mm.put("host", m.host());
            mm.put("partitions", parts);
            members.add(mm);
        }
        out.put("members", members);
        boolean membersOk = wantMembers < 0 || d.members().size() == wantMembers;
        boolean partsOk = wantPartitions < 0 || (union.size() == wantPartitions && total == wantPartitions);
        return membersOk && partsOk;
    }

    // ---------------------------------------------------------------------------------------
    // options and JSON
    // ---------------------------------------------------------------------------------------
    static final class Opts {
        private final Map<String, String> single = new HashMap<>();
        private final List<String> conf = new ArrayList<>();

        Opts(String[] argv) {
            for (int i = 1; i < argv.length; i++) {
                String a = argv[i];
                if (!a.startsWith("--")) throw new IllegalArgumentException("unexpected argument " + a);
                String name = a.substring(2);
                boolean flag = name.equals("stop-on-stdin");
                if (flag) {
                    single.put(name, "true");
                    continue;
                }
                if (i + 1 >= argv.length) throw new IllegalArgumentException("--" + name + " needs a value");
                String v = argv[++i];
                if (name.equals("conf")) conf.add(v);
                else single.put(name, v);
            }
        }

        boolean has(String name) {
            return single.containsKey(name);
        }

        String req(String name) {
            String v = single.get(name);
            if (v == null) throw new IllegalArgumentException("--" + name + " is required");
            return v;
        }

        String str(String name, String dflt) {
            return single.getOrDefault(name, dflt);
        }

        int intOpt(String name, int dflt) {
            String v = single.get(name);
            return v == null ? dflt : Integer.parseInt(v);
        }

        void applyConf(Properties p) {
            for (String kv : conf) {
                int eq = kv.indexOf('=');
                if (eq <= 0) throw new IllegalArgumentException("--conf wants key=value, got " + kv);
                p.put(kv.substring(0, eq), kv.substring(eq + 1));
            }
        }
    }

    static final class Json {
        static String write(Object v) {
            StringBuilder sb = new StringBuilder();
            write(sb, v);
            return sb.toString();
        }

        private static void write(StringBuilder sb, Object v) {
            if (v == null) {
                sb.append("null");
            } else if (v instanceof String) {
                quote(sb, (String) v);
            } else if (v instanceof Number || v instanceof Boolean) {
                sb.append(v);
            } else if (v instanceof Map) {
                sb.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                    if (!first) sb.append(',');
                    first = false;
                    quote(sb, String.valueOf(e.getKey()));
                    sb.append(':');
                    write(sb, e.getValue());
                }
                sb.append('}');
            } else if (v instanceof Collection) {
                sb.append('[');
                boolean first = true;
                for (Object x : (Collection<?>) v) {
                    if (!first) sb.append(',');
                    first = false;
                    write(sb, x);
                }
                sb.append(']');
            } else {
                quote(sb, v.toString());
            }
        }

        private static void quote(StringBuilder sb, String s) {
            sb.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"': sb.append("\\\""); break;
                    case '\\': sb.append("\\\\"); break;
                    case '\n': sb.append("\\n"); break;
                    case '\r': sb.append("\\r"); break;
                    case '\t': sb.append("\\t"); break;
                    default:
                        if (c < 0x20) sb.append(String.format("\\u%04x", (int) c));
                        else sb.append(c);
                }
            }
            sb.append('"');
        }
    }
}
