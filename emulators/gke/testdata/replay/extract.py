#!/usr/bin/env python3
"""Extracts the GKE exchanges of one of Config Connector's golden HTTP logs
into the replay expectations of replay_test.go.

  git -C k8s-config-connector show COMMIT:PATH | extract.py NAME COMMIT PATH UNIQUEID > NAME.json

Only container.googleapis.com calls and Compute Engine's instance group
manager gets are kept; consecutive repeats of the same exchange of a
service (a client polling) are kept once; responses are cut to the fields
the simulator models (see replay_test.go and doc.go), and values GKE
leaves out are written as the zero value the client reads.
"""
import json
import re
import sys

OP = ["name", "operationType", "status", "selfLink", "targetLink", "zone", "location", "statusMessage", "error"]
CONFIG = ["machineType", "diskSizeGb", "diskType", "imageType", "serviceAccount", "metadata", "oauthScopes",
          "shieldedInstanceConfig", "taints", "labels", "kubeletConfig", "confidentialNodes", "ephemeralStorageLocalSsdConfig", "linuxNodeConfig", "resourceManagerTags"]
POOL = ["name", "status", "selfLink", "initialNodeCount", "locations", "instanceGroupUrls", "autoscaling",
        "upgradeSettings", "management", "maxPodsConstraint", "podIpv4CidrSize", "config"]
# currentNodeCount is left out: GKE's lags behind a resize (doc.go).
CLUSTER = ["name", "status", "selfLink", "zone", "location", "locations", "initialNodeCount",
           "nodeConfig", "instanceGroupUrls", "resourceLabels", "releaseChannel", "nodePools",
           "databaseEncryption"]
# Compute Engine's instance group manager, in the fields the simulator models
# that the official Go client reads (it has no serviceAccount).
IGM = ["kind", "name", "zone", "selfLink", "instanceGroup", "instanceTemplate", "baseInstanceName", "targetSize",
       "currentActions", "status", "listManagedInstancesResults", "targetSizePolicy", "targetStoppedSize",
       "targetSuspendedSize", "versions"]
IGM_STATUS = ["isStable", "versionTarget", "allInstancesConfig"]
# Values a client reads as zero when GKE leaves them out.
ZERO = {"initialNodeCount": 0, "location": ""}


def pick(obj, keys, sub=None):
    out = {}
    for k in keys:
        if k in obj:
            v = obj[k]
            if sub and k in sub:
                v = [pick(x, sub[k][0], sub[k][1]) for x in v] if isinstance(v, list) else pick(v, sub[k][0], sub[k][1])
            out[k] = v
        elif k in ZERO and k in ("initialNodeCount", "location"):
            out[k] = ZERO[k]
    return out


def prune(body):
    if body.get("kind") == "compute#instanceGroupManager":
        out = pick(body, IGM)
        if "status" in out:
            out["status"] = pick(out["status"], IGM_STATUS)
        return out
    if "error" in body and "code" in body["error"]:
        e = body["error"]
        return {"error": {"code": e["code"], "status": e["status"], "message": e["message"]}}
    if "operationType" in body:
        return pick(body, OP)
    if "nodePools" in body or "currentMasterVersion" in body:
        out = pick(body, CLUSTER, {"nodeConfig": (CONFIG, None), "nodePools": (POOL, {"config": (CONFIG, None)})})
        return out
    if "config" in body and "name" in body:
        return pick(body, POOL, {"config": (CONFIG, None)})
    return body


def main():
    name, commit, path, unique = sys.argv[1:5]
    drop_groups = len(sys.argv) > 5 and sys.argv[5] == "--no-instance-groups"
    text = sys.stdin.read()
    exchanges = []
    for entry in text.split("\n---\n"):
        entry = entry.strip("\n")
        head = entry.split("\n", 1)[0]
        m = re.match(r"(GET|POST|PUT|DELETE|PATCH) https://container\.googleapis\.com/v1(?:beta1)?/([^?]*)", head)
        if not m and not drop_groups:
            m = re.match(r"(GET) https://compute\.googleapis\.com/(compute/v1/projects/[^/]+/zones/[^/]+/instanceGroupManagers/[^?/]+)(?:\?|$)", head)
        if not m:
            continue
        method, url = m.groups()
        parts = entry.split("\n\n")
        # parts: request headers, [request body], response status+headers, response body
        req_body = None
        i = 1
        if parts[1].lstrip().startswith("{"):
            req_body = json.loads(parts[1])
            i = 2
        status = int(parts[i].split(" ", 1)[0])
        resp = json.loads("\n\n".join(parts[i + 1:])) if len(parts) > i + 1 else {}
        resp = prune(resp)
        if drop_groups:
            resp.pop("instanceGroupUrls", None)
            for p in resp.get("nodePools", []):
                p.pop("instanceGroupUrls", None)
        x = {"method": method, "path": url, "code": status}
        if req_body is not None:
            x["request"] = req_body
        x["response"] = resp
        same = [e for e in exchanges if e["path"].startswith("compute/") == url.startswith("compute/")]
        if same and same[-1] == x:
            continue
        exchanges.append(x)
    out = {
        "source": {"repository": "GoogleCloudPlatform/k8s-config-connector", "commit": commit, "path": path},
        "uniqueId": unique,
        "exchanges": exchanges,
    }
    json.dump(out, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")


main()
