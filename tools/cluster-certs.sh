#!/usr/bin/env bash
# Makes the keys and certificates of a TLS-secured xla-actors cluster with the JDK's keytool:
#   DIR/ca.p12          the cluster's certificate authority (CA): its private key signs node certificates.
#                       Keep it off the nodes (an offline machine); whoever holds it can admit a node.
#   DIR/ca.crt          the CA's certificate (public)
#   DIR/truststore.p12  the CA's certificate alone: copy it to every node (key "trust-store")
#   DIR/NODE.p12        one per NODE argument: that node's private key and its certificate, signed by the
#                       CA, valid for NODE as host name or IP address: copy it to that node only ("key-store")
#   DIR/password        the password of every file above (mode 600), unless given in CLUSTER_CERTS_PASSWORD
#
# Usage: tools/cluster-certs.sh DIR NODE...     e.g. tools/cluster-certs.sh certs 10.0.0.5 10.0.0.6 gpu-3.lan
# Run it again with more NODE arguments to add nodes signed by the same CA (DIR/ca.p12 is reused).
# Nothing here is committed: the tests make their certificates in a temporary directory.
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 DIR NODE...   (NODE: the host name or IP address other nodes reach that node at)" >&2
  exit 2
fi
dir=$1
shift
keytool=${JAVA_HOME:+$JAVA_HOME/bin/}keytool
command -v "$keytool" >/dev/null || { echo "$0: keytool not found: install a JDK or set JAVA_HOME" >&2; exit 1; }
mkdir -p "$dir"
umask 077

if [[ -n "${CLUSTER_CERTS_PASSWORD:-}" ]]; then
  password=$CLUSTER_CERTS_PASSWORD
elif [[ -f "$dir/password" ]]; then
  password=$(cat "$dir/password")
else
  password=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
  printf '%s' "$password" > "$dir/password"
fi
if [[ ${#password} -lt 6 ]]; then
  echo "$0: the password must have at least 6 characters (keytool's minimum)" >&2
  exit 2
fi
export CLUSTER_CERTS_STOREPASS=$password
pass=(-storepass:env CLUSTER_CERTS_STOREPASS)
# keytool, quiet unless it fails; then its own words and the step (a wrong password for an existing
# DIR/ca.p12 fails here, for instance). Its JVM lives a second: the quick compiler alone and the serial
# collector start it in less than half the time (0.9 s, not 2.0 s, a call here; the cluster tests make 3
# sets of certificates, 8 calls each).
kt() {
  local out
  if ! out=$("$keytool" -J-XX:TieredStopAtLevel=1 -J-XX:+UseSerialGC "$@" 2>&1); then
    echo "$0: keytool $1 failed: $out" >&2
    exit 1
  fi
}

if [[ -f "$dir/ca.p12" ]]; then
  kt -list -keystore "$dir/ca.p12" "${pass[@]}" # the password must open the existing CA before anything is made
else
  kt -genkeypair -alias ca -keyalg EC -groupname secp256r1 -validity 3650 \
    -dname "CN=xla-actors cluster CA" -ext bc:c=ca:true -ext KU=keyCertSign,cRLSign \
    -storetype PKCS12 -keystore "$dir/ca.p12" "${pass[@]}"
  kt -exportcert -rfc -alias ca -keystore "$dir/ca.p12" "${pass[@]}" -file "$dir/ca.crt"
  rm -f "$dir/truststore.p12"
  kt -importcert -noprompt -alias ca -file "$dir/ca.crt" \
    -storetype PKCS12 -keystore "$dir/truststore.p12" "${pass[@]}"
fi

for node in "$@"; do
  if [[ ! "$node" =~ ^[A-Za-z0-9._:-]+$ ]]; then
    echo "$0: '$node' is no host name or IP address" >&2
    exit 2
  fi
  if [[ "$node" =~ ^[0-9.]+$ || "$node" == *:* ]]; then san="ip:$node"; else san="dns:$node"; fi
  store="$dir/$node.p12"
  rm -f "$store" "$dir/$node.csr" "$dir/$node.crt"
  kt -genkeypair -alias node -keyalg EC -groupname secp256r1 -validity 825 -dname "CN=$node" \
    -storetype PKCS12 -keystore "$store" "${pass[@]}"
  kt -certreq -alias node -keystore "$store" "${pass[@]}" -file "$dir/$node.csr"
  kt -gencert -rfc -alias ca -keystore "$dir/ca.p12" "${pass[@]}" -validity 825 \
    -infile "$dir/$node.csr" -outfile "$dir/$node.crt" \
    -ext "SAN=$san" -ext KU=digitalSignature -ext EKU=serverAuth,clientAuth
  # The CA first, so keytool can build the chain when the signed certificate replaces the self-signed one.
  kt -importcert -noprompt -alias ca -file "$dir/ca.crt" -keystore "$store" "${pass[@]}"
  kt -importcert -noprompt -alias node -file "$dir/$node.crt" -keystore "$store" "${pass[@]}"
  rm -f "$dir/$node.csr" "$dir/$node.crt"
  echo "$store"
done
echo "$dir/truststore.p12"
