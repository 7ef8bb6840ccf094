// SCRAM users through the Java Admin client, the calls `kafka-configs.sh --alter
// --add-config 'SCRAM-SHA-512=[iterations=N,password=P]' --entity-type users` and
// `--delete-config` make (AlterUserScramCredentials), then a describe
// (DescribeUserScramCredentials). Prints one JSON line last on stdout:
// {"ok": true, "credentials": [["SCRAM_SHA_512", 8192], ...]}; exit 0 when it worked, 2 if not.
//
//   ScramUsers --bootstrap B --user U --mechanism SCRAM-SHA-256|SCRAM-SHA-512
//              [--password P --iterations N | --delete]

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;

public final class ScramUsers {
    public static void main(String[] argv) {
        Map<String, String> o = new HashMap<>();
        for (int i = 0; i < argv.length; i++) {
            String name = argv[i].substring(2);
            if (name.equals("delete")) o.put(name, "true");
            else o.put(name, argv[++i]);
        }
        boolean ok = false;
        String result;
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, o.get("bootstrap"));
        try (Admin admin = Admin.create(p)) {
            String user = o.get("user");
            ScramMechanism mech = ScramMechanism.fromMechanismName(o.get("mechanism"));
            UserScramCredentialAlteration change = o.containsKey("delete")
                ? new UserScramCredentialDeletion(user, mech)
                : new UserScramCredentialUpsertion(user,
                    new ScramCredentialInfo(mech, Integer.parseInt(o.get("iterations"))), o.get("password"));
            admin.alterUserScramCredentials(List.of(change)).all().get();
            List<String> creds = new ArrayList<>();
            Map<String, UserScramCredentialsDescription> described =
                admin.describeUserScramCredentials().all().get();
            UserScramCredentialsDescription d = described.get(user);
            if (d != null) {
                for (ScramCredentialInfo info : d.credentialInfos()) {
                    creds.add("[\"" + info.mechanism() + "\"," + info.iterations() + "]");
                }
            }
            ok = true;
            result = "{\"ok\":true,\"credentials\":[" + String.join(",", creds) + "]}";
        } catch (Exception e) {
            result = "{\"ok\":false,\"error\":\"" + e.toString().replace("\\", "\\\\").replace("\"", "'") + "\"}";
        }
        System.out.println(result);
        System.exit(ok ? 0 : 2);
    }
}
