// Admin-client reads of Kafka 4.x for the integration suite, each printing one JSON line of
// results on stdout (exit 0 on success, 2 on failure with "ok": false and "error"), as
// SluiceClient does:
//
//   describe-topics        --bootstrap B [--topics T1,T2,...] [--limit N]
//       Admin.describeTopics of the named topics (of every topic, internal ones included,
//       without --topics), with partitionSizeLimitPerResponse N: the Java admin pages through
//       DescribeTopicPartitions (KIP-966) when the broker serves it. Per topic: id, internal,
//       and [partition, leader, replicas, isr] per partition; per failed topic its error.
//   list-config-resources  --bootstrap B [--types TOPIC,BROKER,...]
//       Admin.listConfigResources (KIP-1142): [type, name] pairs.

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.ListConfigResourcesOptions;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;

public final class AdminTools {

    public static void main(String[] argv) {
        Map<String, Object> out = new LinkedHashMap<>();
        int rc;
        try {
            SluiceClient.Opts o = new SluiceClient.Opts(argv);
            out.put("command", argv[0]);
            try (Admin admin = Admin.create(props(o))) {
                switch (argv[0]) {
                    case "describe-topics": describeTopics(admin, o, out); break;
                    case "list-config-resources": listConfigResources(admin, o, out); break;
                    default: throw new IllegalArgumentException("unknown command " + argv[0]);
                }
            }
            out.put("ok", true);
            rc = 0;
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

    static Properties props(SluiceClient.Opts o) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, o.req("bootstrap"));
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "sluice-java-admin-tools");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
        o.applyConf(p);
        return p;
    }

    static void describeTopics(Admin admin, SluiceClient.Opts o, Map<String, Object> out) throws Exception {
        List<String> names = list(o.str("topics", ""));
        if (names.isEmpty()) {
            names = new ArrayList<>(admin.listTopics(new ListTopicsOptions().listInternal(true))
                .names().get(15, TimeUnit.SECONDS));
        }
        DescribeTopicsOptions options = new DescribeTopicsOptions()
            .partitionSizeLimitPerResponse(o.intOpt("limit", 2000));
        Map<String, KafkaFuture<TopicDescription>> futures =
            admin.describeTopics(names, options).topicNameValues();
        Map<String, Object> topics = new TreeMap<>();
        for (Map.Entry<String, KafkaFuture<TopicDescription>> e : futures.entrySet()) {
            Map<String, Object> t = new LinkedHashMap<>();
            try {
                TopicDescription d = e.getValue().get(15, TimeUnit.SECONDS);
                t.put("id", d.topicId().toString());
                t.put("internal", d.isInternal());
                List<Object> parts = new ArrayList<>();
                for (TopicPartitionInfo p : d.partitions()) {
                    parts.add(List.of(p.partition(), p.leader() == null ? -1 : p.leader().id(),
                        ids(p.replicas()), ids(p.isr())));
                }
                t.put("partitions", parts);
            } catch (ExecutionException x) {
                t.put("error", x.getCause().getClass().getSimpleName());
            }
            topics.put(e.getKey(), t);
        }
        out.put("topics", topics);
    }

    /** The items of a comma-separated option value (none for an empty one). */
    static List<String> list(String csv) {
        List<String> out = new ArrayList<>();
        for (String s : csv.split(",")) if (!s.isEmpty()) out.add(s);
        return out;
    }

    static List<Integer> ids(List<Node> nodes) {
        List<Integer> out = new ArrayList<>();
        for (Node n : nodes) out.add(n.id());
        return out;
    }

    static void listConfigResources(Admin admin, SluiceClient.Opts o, Map<String, Object> out) throws Exception {
        Set<ConfigResource.Type> types = new HashSet<>();
        for (String t : list(o.str("types", ""))) types.add(ConfigResource.Type.valueOf(t));
        List<Object> listed = new ArrayList<>();
        for (ConfigResource r : admin.listConfigResources(types, new ListConfigResourcesOptions())
                .all().get(15, TimeUnit.SECONDS)) {
            listed.add(List.of(r.type().toString(), r.name()));
        }
        out.put("resources", listed);
    }
}
