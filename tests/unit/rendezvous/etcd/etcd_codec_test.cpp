// The etcd client's codec without sockets: base64, the gateway's JSON bodies and responses (int64
// as strings, zero fields omitted), the HTTP/1.1 request bytes and response reader, and the
// watch stream's object splitter.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "ddp/error.hpp"
#include "rendezvous/etcd/etcd_http.hpp"
#include "rendezvous/etcd/etcd_json.hpp"

using namespace ddp::rdzv::etcd;
using nlohmann::json;

TEST_CASE("base64 matches RFC 4648 and round-trips any bytes", "[etcd]") {
  CHECK(base64_encode("") == "");
  CHECK(base64_encode("f") == "Zg==");
  CHECK(base64_encode("fo") == "Zm8=");
  CHECK(base64_encode("foo") == "Zm9v");
  CHECK(base64_encode("/ddprun/x") == "L2RkcHJ1bi94");
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes += static_cast<char>(i);
  for (std::size_t n = 0; n < 8; ++n) {
    CHECK(base64_decode(base64_encode(bytes.substr(n))) == bytes.substr(n));
  }
  CHECK_THROWS_AS(base64_decode("a$b="), ddp::IoError);
}

TEST_CASE("prefix_end bounds exactly the keys under a prefix", "[etcd]") {
  CHECK(prefix_end("/ddprun/job/r1/") == "/ddprun/job/r10");
}

TEST_CASE("request bodies use base64 keys and int64 as strings", "[etcd]") {
  RangeRequest r;
  r.key = "/a/";
  r.range_end = prefix_end("/a/");
  r.revision = 42;
  r.count_only = true;
  r.sort_by_create = true;
  const json range = json::parse(range_body(r));
  CHECK(range["key"] == base64_encode("/a/"));
  CHECK(range["range_end"] == base64_encode("/a0"));
  CHECK(range["revision"] == "42");
  CHECK(range["count_only"] == true);
  CHECK(range["sort_target"] == "CREATE");
  CHECK_FALSE(range.contains("limit"));

  TxnRequest t;
  t.compare.push_back({"/k", Compare::Target::kCreate, 0, {}});
  t.compare.push_back({"/m", Compare::Target::kMod, 7, {}});
  t.success.push_back({"/k", "v", 0x7fffffffffffff01});
  t.success_reads.push_back(r);
  t.success_deletes.push_back("/gone");
  t.failure.push_back(r);
  const json txn = json::parse(txn_body(t));
  CHECK(txn["compare"][0]["target"] == "CREATE");
  CHECK(txn["compare"][0]["create_revision"] == "0");
  CHECK(txn["compare"][0]["result"] == "EQUAL");
  CHECK(txn["compare"][1]["mod_revision"] == "7");
  CHECK(txn["success"][0]["request_put"]["value"] == base64_encode("v"));
  CHECK(txn["success"][0]["request_put"]["lease"] == "9223372036854775553");  // beyond 2^53
  // A success branch's reads come after its puts, so that they see them, and before its
  // deletes, so that they still see the deleted keys.
  REQUIRE(txn["success"].size() == 3);
  CHECK(txn["success"][1]["request_range"]["count_only"] == true);
  CHECK(txn["success"][2]["request_delete_range"]["key"] == base64_encode("/gone"));
  CHECK_FALSE(txn["success"][2]["request_delete_range"].contains("range_end"));
  CHECK(txn["failure"][0]["request_range"]["key"] == base64_encode("/a/"));

  CHECK(json::parse(lease_id_body(0x694d7aee9c8e6c0b))["ID"] == "7587856112436538379");
  const json watch = json::parse(watch_create_body("/w/", "/w0", 9, true));
  CHECK(watch["create_request"]["start_revision"] == "9");
  CHECK(watch["create_request"]["prev_kv"] == true);
}

TEST_CASE("responses read int64 strings and default the omitted zero fields", "[etcd]") {
  const RangeResponse empty =
      decode_range(R"({"header":{"cluster_id":"1","revision":"17","raft_term":"2"}})", "range");
  CHECK(empty.revision == 17);
  CHECK(empty.count == 0);
  CHECK(empty.kvs.empty());

  const std::string k = base64_encode("/a/b");
  const std::string v = base64_encode("hello");
  const RangeResponse one = decode_range(R"({"header":{"revision":"20"},"kvs":[{"key":")" + k +
                                             R"(","create_revision":"18",)"
                                             R"("mod_revision":"19","version":"2","value":")" +
                                             v + R"(","lease":"123"}],"count":"1"})",
                                         "range");
  REQUIRE(one.kvs.size() == 1);
  CHECK(one.kvs[0].key == "/a/b");
  CHECK(one.kvs[0].value == "hello");
  CHECK(one.kvs[0].create_revision == 18);
  CHECK(one.kvs[0].lease == 123);
  CHECK(one.count == 1);

  // A failed transaction has no "succeeded"; its failure branch's range comes back.
  const TxnResponse failed = decode_txn(
      R"({"header":{"revision":"30"},"responses":[{"response_range":{"header":{},"kvs":[{"key":")" +
          k + R"(","value":")" + v +
          R"(","create_revision":"5","mod_revision":"5"}],"count":"1"}}]})",
      "txn");
  CHECK_FALSE(failed.succeeded);
  REQUIRE(failed.ranges.size() == 1);
  CHECK(failed.ranges[0].kvs[0].value == "hello");
  CHECK(decode_txn(R"({"header":{"revision":"31"},"succeeded":true,"responses":[)"
                   R"({"response_put":{"header":{}}}]})",
                   "txn")
            .succeeded);

  CHECK(decode_put(R"({"header":{"revision":"44"}})", "put") == 44);
  const LeaseGrant grant =
      decode_lease_grant(R"({"header":{},"ID":"7587856112436538379","TTL":"3"})", "grant");
  CHECK(grant.id == 0x694d7aee9c8e6c0b);
  CHECK(grant.ttl == 3);
  CHECK(decode_lease_keepalive(R"({"result":{"header":{},"ID":"5","TTL":"3"}})", "ka") == 3);
  CHECK(decode_lease_keepalive(R"({"result":{"header":{},"ID":"5"}})", "ka") == 0);  // expired
}

TEST_CASE("watch messages: created, PUT without a type, DELETE with its previous value", "[etcd]") {
  const WatchResponse created =
      decode_watch(R"({"result":{"header":{"revision":"8"},"created":true}})", "watch");
  CHECK(created.created);
  CHECK(created.events.empty());

  const std::string k = base64_encode("/r0/join/n1");
  const WatchResponse events =
      decode_watch(R"({"result":{"header":{"revision":"12"},"events":[{"kv":{"key":")" + k +
                       R"(","create_revision":"11","mod_revision":"11","value":")" +
                       base64_encode("d") + R"("}},{"type":"DELETE","kv":{"key":")" + k +
                       R"(","mod_revision":"12"},"prev_kv":{"key":")" + k +
                       R"(","create_revision":"11","mod_revision":"11"}}]}})",
                   "watch");
  REQUIRE(events.events.size() == 2);
  CHECK_FALSE(events.events[0].is_delete);
  CHECK(events.events[0].kv.value == "d");
  CHECK(events.events[1].is_delete);
  REQUIRE(events.events[1].prev_kv);
  CHECK(events.events[1].prev_kv->create_revision == 11);

  const WatchResponse compacted =
      decode_watch(R"({"result":{"header":{},"canceled":true,"compact_revision":"3"}})", "watch");
  CHECK(compacted.canceled);
  CHECK(compacted.compact_revision == 3);
}

TEST_CASE("malformed responses are IoErrors naming the operation", "[etcd]") {
  CHECK_THROWS_WITH(decode_range("not json", "range(/x)"), Catch::Contains("range(/x)"));
  CHECK_THROWS_AS(decode_range(R"({"kvs":[{"key":"@@"}]})", "range"), ddp::IoError);
  CHECK_THROWS_AS(decode_lease_grant(R"({"header":{}})", "grant"), ddp::IoError);
  CHECK_THROWS_AS(decode_watch(R"({"error":{"grpc_code":14}})", "watch"), ddp::IoError);
}

TEST_CASE("gateway errors: no leader and unavailable are retried elsewhere", "[etcd]") {
  const auto no_leader = decode_error(
      R"({"error":"etcdserver: no leader","code":14,"message":"etcdserver: no leader"})");
  REQUIRE(no_leader);
  CHECK(no_leader->code == 14);
  CHECK(is_retryable(*no_leader));
  const auto bad = decode_error(R"({"error":"bad key","code":3,"message":"bad key"})");
  REQUIRE(bad);
  CHECK_FALSE(is_retryable(*bad));
  // Inside a stream (keep-alive, watch) the error is an object.
  const auto streamed = decode_error(
      R"({"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: too many requests"}})");
  REQUIRE(streamed);
  CHECK(streamed->code == 14);
  CHECK(streamed->message == "etcdserver: too many requests");
  CHECK(is_retryable(*streamed));
  const auto lease_gone = decode_error(
      R"({"error":{"grpc_code":5,"message":"etcdserver: requested lease not found"}})");
  REQUIRE(lease_gone);
  CHECK_FALSE(is_retryable(*lease_gone));
  CHECK_FALSE(decode_error(R"({"header":{}})"));
  CHECK_FALSE(decode_error("<html>"));
}

TEST_CASE("a POST is one HTTP/1.1 request with a JSON body and its length", "[etcd]") {
  const std::string bytes = encode_post("10.0.0.1:2379", "/v3/kv/range", R"({"key":"YQ=="})");
  CHECK_THAT(bytes, Catch::StartsWith("POST /v3/kv/range HTTP/1.1\r\n"));
  CHECK_THAT(bytes, Catch::Contains("Host: 10.0.0.1:2379\r\n"));
  CHECK_THAT(bytes, Catch::Contains("Content-Type: application/json\r\n"));
  CHECK_THAT(bytes, Catch::Contains("Content-Length: 14\r\n"));
  CHECK_THAT(bytes, Catch::EndsWith("\r\n\r\n{\"key\":\"YQ==\"}"));
  CHECK_THAT(bytes, !Catch::Contains("Authorization"));
}

TEST_CASE("issue 31: etcd's auth token rides in the Authorization header", "[etcd]") {
  CHECK_THAT(encode_post("10.0.0.1:2379", "/v3/kv/range", "{}", "tok.123"),
             Catch::Contains("Authorization: tok.123\r\n"));
  CHECK(json::parse(authenticate_body("root", "pw\"1")) ==
        json{{"name", "root"}, {"password", "pw\"1"}});
  CHECK(decode_auth_token(R"({"header":{"revision":"3"},"token":"abc.7"})", "auth") == "abc.7");
  CHECK_THROWS_WITH(decode_auth_token(R"({"header":{}})", "authenticate(user=root)"),
                    Catch::Contains("authenticate(user=root)"));
}

TEST_CASE("the response reader takes any split of a sized, chunked or closed response", "[etcd]") {
  SECTION("Content-Length, one byte at a time") {
    const std::string wire =
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}";
    ResponseReader reader;
    for (const char c : wire) {
      CHECK_FALSE(reader.is_done());
      reader.feed(std::string_view(&c, 1));
    }
    CHECK(reader.is_done());
    CHECK(reader.status() == 200);
    CHECK(reader.keep_alive());
    CHECK(reader.take_body() == "{\"a\":1}");
  }
  SECTION("a chunked stream of watch messages, cut mid-object and mid-string") {
    ResponseReader reader;
    JsonObjectStream messages;
    reader.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
    CHECK(reader.has_header());
    reader.feed("1b\r\n{\"result\":{\"created\":true");
    messages.feed(reader.take_body());
    CHECK_FALSE(messages.next());
    reader.feed("}}\r\n");
    reader.feed("e\r\n\n{\"s\":\"}{\\\"\"}\n\r\n");
    messages.feed(reader.take_body());
    CHECK(messages.next() == std::optional<std::string>("{\"result\":{\"created\":true}}"));
    CHECK(messages.next() == std::optional<std::string>("{\"s\":\"}{\\\"\"}"));
    CHECK_FALSE(messages.next());
    CHECK_FALSE(reader.is_done());  // a watch never ends by itself
    reader.feed("0\r\n\r\n");
    CHECK(reader.is_done());
  }
  SECTION("a body delimited by the connection's close") {
    ResponseReader reader;
    reader.feed("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{\"result\":{}}");
    CHECK_FALSE(reader.is_done());
    reader.feed_eof();
    CHECK(reader.is_done());
    CHECK_FALSE(reader.keep_alive());
    CHECK(reader.take_body() == "{\"result\":{}}");
  }
  SECTION("a cut or malformed response is an IoError") {
    ResponseReader cut;
    cut.feed("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{\"a\"");
    CHECK_THROWS_AS(cut.feed_eof(), ddp::IoError);
    // A TLS-only member closes a plain-http connection without a byte.
    ResponseReader empty;
    CHECK_THROWS_WITH(empty.feed_eof(), Catch::Contains("closed without a response"));
    ResponseReader bad;
    CHECK_THROWS_AS(bad.feed("SMTP ready\r\n\r\n"), ddp::IoError);
    JsonObjectStream stream;
    stream.feed("[1,2]");
    CHECK_THROWS_AS(stream.next(), ddp::IoError);
  }
}
