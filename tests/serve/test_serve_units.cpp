// The server's parts on their own: the metrics registry, request parsing, the batcher.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <thread>

#include "serve/batcher.h"
#include "serve/metrics.h"
#include "serve/request.h"

namespace vlrt::serve {

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(ServeMetrics, RendersPrometheusText) {
  Metrics m;
  m.counter("req_total", "Requests.");
  m.gauge("depth", "Queue depth.");
  m.histogram("lat_seconds", "Latency.", {0.1, 1});
  m.add("req_total", {{"endpoint", "/v1/detect"}, {"status", "200"}});
  m.add("req_total", {{"endpoint", "/v1/detect"}, {"status", "200"}});
  m.add("req_total", {{"path", "a\"b\\c\nd"}});
  m.set("depth", {}, 3);
  m.observe("lat_seconds", {{"e", "x"}}, 0.05);
  m.observe("lat_seconds", {{"e", "x"}}, 0.5);
  m.observe("lat_seconds", {{"e", "x"}}, 7);
  std::string page = m.render();
  EXPECT_TRUE(contains(page, "# HELP req_total Requests.\n# TYPE req_total counter\n")) << page;
  EXPECT_TRUE(contains(page, "req_total{endpoint=\"/v1/detect\",status=\"200\"} 2\n")) << page;
  EXPECT_TRUE(contains(page, "req_total{path=\"a\\\"b\\\\c\\nd\"} 1\n")) << page;
  EXPECT_TRUE(contains(page, "# TYPE depth gauge\ndepth 3\n")) << page;
  EXPECT_TRUE(contains(page, "lat_seconds_bucket{e=\"x\",le=\"0.1\"} 1\n")) << page;
  EXPECT_TRUE(contains(page, "lat_seconds_bucket{e=\"x\",le=\"1\"} 2\n")) << page;
  EXPECT_TRUE(contains(page, "lat_seconds_bucket{e=\"x\",le=\"+Inf\"} 3\n")) << page;
  EXPECT_TRUE(contains(page, "lat_seconds_sum{e=\"x\"} 7.55\n")) << page;
  EXPECT_TRUE(contains(page, "lat_seconds_count{e=\"x\"} 3\n")) << page;
  EXPECT_EQ(m.value("req_total", {{"endpoint", "/v1/detect"}, {"status", "200"}}), 2);
  EXPECT_THROW(m.set("req_total", {}, 1), Error);  // counters only go up
  EXPECT_THROW(m.add("undeclared"), Error);
}

TEST(ServeRequest, KServeDatatypes) {
  EXPECT_EQ(kserve_datatype(DType::f32), "FP32");
  EXPECT_EQ(kserve_datatype(DType::i64), "INT64");
  EXPECT_EQ(kserve_datatype(DType::boolean), "BOOL");
  EXPECT_EQ(dtype_from_kserve("FP16"), DType::f16);
  EXPECT_EQ(dtype_from_kserve("BYTES"), DType::undefined);
}

TEST(ServeRequest, InferRequestParsesAndRefuses) {
  InferRequest r = parse_infer_request(
      R"({"id":"7","inputs":[{"name":"x","shape":[2,2],"datatype":"INT64","data":[[1,2],[3,4]]},
          {"name":"m","shape":[3],"datatype":"BOOL","data":[true,false,1]}],"outputs":[{"name":"y"}]})");
  EXPECT_EQ(r.id, "7");
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs.at("x").to_int64_vector(), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(r.inputs.at("m").data<bool>()[2], true);
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].name, "y");
  EXPECT_FALSE(r.outputs[0].binary);

  auto error = [&](const std::string& body) {
    try {
      check_output_names(parse_infer_request(body), {"y"});
    } catch (const HttpError& e) {
      EXPECT_EQ(e.status(), 400) << body;
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto in = [](const std::string& tensor) { return R"({"inputs":[)" + tensor + "]}"; };
  EXPECT_TRUE(contains(error("[1,2]"), "expected a JSON object"));
  EXPECT_TRUE(contains(error("{\"inputs\":"), "not valid JSON"));
  EXPECT_TRUE(contains(error(std::string(100000, '[') + std::string(100000, ']')), "nested deeper than 64"));
  EXPECT_TRUE(contains(error("{}"), "missing field 'inputs'"));
  EXPECT_TRUE(contains(error(R"({"inputs":{}})"), "expected an array of tensors"));
  EXPECT_TRUE(contains(error(in(R"({"name":"x","shape":[2],"datatype":"FP32","data":[1]})")),
                       "data has 1 elements but shape [2] needs 2"));
  EXPECT_TRUE(contains(error(in(R"({"name":"x","shape":[1],"datatype":"FP128","data":[1]})")),
                       "datatype 'FP128' is not supported"));
  EXPECT_TRUE(
      contains(error(in(R"({"name":"x","shape":[-1],"datatype":"FP32","data":[]})")), "non-negative"));
  EXPECT_TRUE(contains(error(in(R"({"name":"x","shape":[1],"datatype":"FP32","data":["a"]})")),
                       "data[0] is a string"));
  EXPECT_TRUE(
      contains(error(in(R"({"name":"x","shape":[1],"datatype":"INT8","data":[300]})")), "in its range"));
  EXPECT_TRUE(
      contains(error(in(R"({"name":"x","shape":[1],"datatype":"INT64","data":[1.5]})")), "an integer"));
  EXPECT_TRUE(
      contains(error(in(R"({"name":"x","shape":[1],"datatype":"BOOL","data":[2]})")), "true or false"));
  EXPECT_TRUE(contains(error(in(R"({"name":"x","shape":[1],"datatype":"FP32"})")), "has no 'data'"));
  EXPECT_TRUE(
      contains(error(in(R"({"name":"x","shape":[4294967296,4294967296],"datatype":"FP32","data":[]})")),
               "too many elements"));
  EXPECT_TRUE(contains(error(in(R"({"name":"x","shape":[1],"datatype":"FP32","data":[1]},
                                  {"name":"x","shape":[1],"datatype":"FP32","data":[1]})")),
                       "given twice"));
  EXPECT_TRUE(contains(error(R"({"inputs":[],"outputs":[{"name":"z"}]})"), "unknown output 'z'"));
  EXPECT_TRUE(contains(error(R"({"inputs":[],"extra":1})"), "unknown field 'extra'"));
}

namespace {

struct TestJob : Job {
  int id = 0;
};

std::shared_ptr<TestJob> job(const std::string& key, int id) {
  auto j = std::make_shared<TestJob>();
  j->key = key;
  j->id = id;
  return j;
}

}  // namespace

TEST(ServeRequest, InferResponseWritesNonFiniteValuesAsNull) {
  float inf = std::numeric_limits<float>::infinity();
  TensorMap outputs = {{"logits", Tensor::from_vector<float>({1.5f, -inf, std::nanf(""), inf}, {1, 4})}};
  InferRequest request;
  request.id = "r7";
  InferReply reply = infer_response("m", request, {outputs, {}, {"logits"}});
  EXPECT_EQ(reply.json_length, std::string::npos);
  auto j = nlohmann::json::parse(reply.body);
  EXPECT_EQ(j["id"], "r7");
  const auto& data = j["outputs"][0]["data"];
  ASSERT_EQ(data.size(), 4u);
  EXPECT_EQ(data[0].get<double>(), 1.5);
  for (int i : {1, 2, 3}) EXPECT_TRUE(data[i].is_null()) << data.dump();
  EXPECT_EQ(j["outputs"][0]["shape"], nlohmann::json({1, 4}));
}

TEST(ServeBatcher, GroupsByKeyUpToTheLimit) {
  std::mutex mu;
  std::vector<std::vector<int>> batches;
  BatcherOptions o;
  o.max_delay = std::chrono::milliseconds(150);
  Batcher b(
      o, [](const Job&) { return 3; },
      [&](const std::vector<std::shared_ptr<Job>>& batch) {
        std::vector<int> ids;
        for (auto& j : batch) ids.push_back(static_cast<TestJob&>(*j).id);
        {
          std::lock_guard<std::mutex> lk(mu);
          batches.push_back(ids);
        }
        for (auto& j : batch) j->finish();
      });
  std::vector<std::shared_ptr<TestJob>> jobs = {job("a", 1), job("b", 2), job("a", 3),
                                                job("", 4),  job("a", 5), job("a", 6)};
  for (auto& j : jobs) ASSERT_EQ(b.submit(j), Batcher::Submit::queued);
  for (auto& j : jobs) ASSERT_TRUE(j->finished_by(Clock::now() + std::chrono::seconds(5)));
  std::lock_guard<std::mutex> lk(mu);
  // The oldest ("a") fills to the limit at once; "b" and the key-less job go alone; the
  // last "a" waits out the delay by itself.
  ASSERT_EQ(batches.size(), 4u);
  EXPECT_EQ(batches[0], (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(batches[1], (std::vector<int>{2}));
  EXPECT_EQ(batches[2], (std::vector<int>{4}));
  EXPECT_EQ(batches[3], (std::vector<int>{6}));
  EXPECT_EQ(jobs[0]->batch_size, 3);
}

TEST(ServeBatcher, ShortBatchesArePowersOfTwo) {
  std::mutex mu;
  std::vector<size_t> sizes;
  BatcherOptions o;
  o.max_delay = std::chrono::milliseconds(50);
  Batcher b(
      o, [](const Job&) { return 8; },
      [&](const std::vector<std::shared_ptr<Job>>& batch) {
        {
          std::lock_guard<std::mutex> lk(mu);
          sizes.push_back(batch.size());
        }
        for (auto& j : batch) j->finish();
      });
  std::vector<std::shared_ptr<TestJob>> jobs;
  for (int i = 0; i < 7; i++) jobs.push_back(job("k", i));
  for (auto& j : jobs) b.submit(j);
  for (auto& j : jobs) ASSERT_TRUE(j->finished_by(Clock::now() + std::chrono::seconds(5)));
  std::lock_guard<std::mutex> lk(mu);
  EXPECT_EQ(sizes, (std::vector<size_t>{4, 2, 1}));
}

TEST(ServeBatcher, FullQueueCancelAndDrain) {
  std::atomic<int> ran{0};
  BatcherOptions o;
  o.max_queue = 2;
  o.max_delay = std::chrono::seconds(30);  // nothing runs until drained
  Batcher b(
      o, [](const Job&) { return 8; },
      [&](const std::vector<std::shared_ptr<Job>>& batch) {
        ran += int(batch.size());
        for (auto& j : batch) j->finish();
      });
  auto j1 = job("k", 1), j2 = job("k", 2), j3 = job("k", 3);
  EXPECT_EQ(b.submit(j1), Batcher::Submit::queued);
  EXPECT_EQ(b.submit(j2), Batcher::Submit::queued);
  EXPECT_EQ(b.submit(j3), Batcher::Submit::full);
  EXPECT_EQ(b.depth(), 2u);
  EXPECT_TRUE(b.cancel(j1));
  EXPECT_FALSE(b.cancel(j1));
  EXPECT_EQ(b.depth(), 1u);
  b.drain();  // does not wait out the delay
  EXPECT_EQ(ran, 1);
  EXPECT_TRUE(j2->finished_by(Clock::now()));
  EXPECT_EQ(b.submit(j3), Batcher::Submit::closed);
}

TEST(ServeBatcher, HeldPlacesCountAgainstTheQueue) {
  BatcherOptions o;
  o.max_queue = 2;
  o.max_delay = std::chrono::seconds(30);  // nothing runs until drained
  std::atomic<int> ran{0};
  Batcher b(
      o, [](const Job&) { return 8; },
      [&](const std::vector<std::shared_ptr<Job>>& batch) {
        ran += int(batch.size());
        for (auto& j : batch) j->finish();
      });
  Batcher::Place p1, p2, p3;
  EXPECT_EQ(b.reserve(p1), Batcher::Submit::queued);
  EXPECT_TRUE(p1.held());
  EXPECT_EQ(b.submit(job("k", 1)), Batcher::Submit::queued);
  EXPECT_EQ(b.reserve(p2), Batcher::Submit::full);  // one queued + one held fill it
  EXPECT_FALSE(p2.held());
  EXPECT_EQ(b.submit(job("k", 2)), Batcher::Submit::full);
  auto j3 = job("k", 3);
  EXPECT_EQ(b.submit(j3, &p1), Batcher::Submit::queued);  // the held place is used up
  EXPECT_FALSE(p1.held());
  EXPECT_EQ(b.depth(), 2u);
  EXPECT_TRUE(b.cancel(j3));
  {
    Batcher::Place unused;
    EXPECT_EQ(b.reserve(unused), Batcher::Submit::queued);
    EXPECT_EQ(b.reserve(p3), Batcher::Submit::full);
  }  // given back unused
  EXPECT_EQ(b.reserve(p3), Batcher::Submit::queued);
  Batcher::Place moved(std::move(p3));
  EXPECT_FALSE(p3.held());
  EXPECT_TRUE(moved.held());
  b.drain();
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(b.reserve(p2), Batcher::Submit::closed);
  EXPECT_EQ(b.submit(job("k", 4), &moved), Batcher::Submit::closed);
  EXPECT_FALSE(moved.held());
}

TEST(ServeBatcher, AThrowingRunFailsItsJobsOnly) {
  BatcherOptions o;
  o.max_delay = std::chrono::milliseconds(0);
  Batcher b(
      o, [](const Job&) { return 1; },
      [](const std::vector<std::shared_ptr<Job>>& batch) {
        if (static_cast<TestJob&>(*batch[0]).id == 1) throw std::runtime_error("boom");
        for (auto& j : batch) j->finish();
      });
  auto bad = job("", 1), good = job("", 2);
  b.submit(bad);
  b.submit(good);
  ASSERT_TRUE(bad->finished_by(Clock::now() + std::chrono::seconds(5)));
  ASSERT_TRUE(good->finished_by(Clock::now() + std::chrono::seconds(5)));
  EXPECT_EQ(bad->status, 500);
  EXPECT_TRUE(contains(bad->error, "boom"));
  EXPECT_EQ(good->status, 200);
}

}  // namespace vlrt::serve
