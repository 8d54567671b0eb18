// SPDX-License-Identifier: Apache-2.0
// The trace readers on the real shared traces (checked against an independent, slow
// nlohmann::json pass over the same bytes), on our own fixtures (every malformed-line case, in
// strict and lenient mode), on damaged gzip, empty and binary files, and against nlohmann on
// tens of thousands of mutated lines (the scanner must accept exactly the valid ones).
#include "../common/files.hpp"
#include "../common/temp_dir.hpp"
#include "../common/thrown.hpp"

#include <cxltier/error.hpp>
#include <cxltier/tools/trace.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

using namespace cxltier;
using cxlt_test::thrown;
using namespace cxltier::trace;
using nlohmann::json;

namespace {

std::string data_dir() {
  const char *d = std::getenv("CXLT_TEST_DATA");
  return std::string(d ? d : "tests/data") + "/traces/";
}

// Decompresses a whole gzip file with zlib's gz* interface (not the reader's inflate loop).
// `complete` is false when the stream is damaged or truncated.
std::string gunzip(const std::string &path, bool *complete = nullptr) {
  gzFile g = gzopen(path.c_str(), "rb");
  std::string out;
  char buf[65536];
  int n;
  while ((n = gzread(g, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  int err = 0;
  gzerror(g, &err);
  if (complete) *complete = n == 0 && err == Z_OK;
  gzclose(g);
  return out;
}

std::vector<std::string> lines_of(const std::string &text) {
  std::vector<std::string> v;
  std::istringstream ss(text);
  std::string l;
  while (std::getline(ss, l)) v.push_back(l);
  return v;
}

// The slow, independent reading of a hash trace: every request's block ids in order.
std::vector<std::vector<uint64_t>> nlohmann_requests(const std::string &text, bool dynamo) {
  std::vector<std::vector<uint64_t>> out;
  for (const std::string &l : lines_of(text)) {
    if (l.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j = json::parse(l);
    if (dynamo) {
      if (j["event"]["event_type"] != "request_end") continue;
      out.push_back(j["event"]["request"]["replay"]["input_sequence_hashes"].get<std::vector<uint64_t>>());
    } else {
      out.push_back(j["hash_ids"].get<std::vector<uint64_t>>());
    }
  }
  return out;
}

std::vector<std::vector<uint64_t>> read_all(Reader &r) {
  std::vector<std::vector<uint64_t>> out;
  Request q;
  while (r.next(q)) out.emplace_back(q.blocks.begin(), q.blocks.end());
  return out;
}

struct Counts {
  uint64_t requests = 0, references = 0, unique = 0;
};
Counts count(const std::vector<std::vector<uint64_t>> &reqs) {
  Counts c;
  std::set<uint64_t> u;
  for (auto &r : reqs) {
    ++c.requests;
    c.references += r.size();
    u.insert(r.begin(), r.end());
  }
  c.unique = u.size();
  return c;
}

std::vector<uint64_t> issue_lines(const ReaderStats &s) {
  std::vector<uint64_t> v;
  for (auto &i : s.issues) v.push_back(i.line);
  return v;
}

bool contains(const std::string &hay, const std::string &needle) { return hay.find(needle) != std::string::npos; }

}  // namespace

// --- The real traces --------------------------------------------------------------------------

struct RealTrace {
  const char *file;
  Format format;
  uint32_t block_size;
  bool gz;
  uint64_t requests, references, unique, other;
};

class RealTraces : public ::testing::TestWithParam<RealTrace> {};

// Each shared trace is read with its format detected; every request's ids equal what a DOM
// parser reads from the same line, and the totals are the ones the report quotes.
TEST_P(RealTraces, MatchAnIndependentJsonReading) {
  const RealTrace &t = GetParam();
  std::string path = data_dir() + t.file;
  std::string text = t.gz ? gunzip(path) : cxlt_test::read_file(path);
  auto expected = nlohmann_requests(text, t.format == Format::dynamo);
  Counts ce = count(expected);
  EXPECT_EQ(ce.requests, t.requests);
  EXPECT_EQ(ce.references, t.references);
  EXPECT_EQ(ce.unique, t.unique);

  Reader r(path);
  EXPECT_EQ(r.format(), t.format);
  EXPECT_EQ(r.block_size_tokens(), t.block_size);
  EXPECT_EQ(r.compressed(), t.gz);
  EXPECT_FALSE(r.has_attention());
  auto got = read_all(r);
  EXPECT_EQ(got, expected);
  const ReaderStats &s = r.stats();
  EXPECT_EQ(s.requests, t.requests);
  EXPECT_EQ(s.references, t.references);
  EXPECT_EQ(s.malformed, 0u);
  EXPECT_EQ(s.other_events, t.other);
  EXPECT_EQ(s.bytes, text.size());
  EXPECT_EQ(s.lines, lines_of(text).size());

  // Strict mode reads the same; rewind starts over with fresh statistics.
  Reader strict(path, ReaderOptions{.strict = true});
  EXPECT_EQ(read_all(strict), expected);
  strict.rewind();
  EXPECT_EQ(strict.stats().requests, 0u);
  EXPECT_EQ(read_all(strict), expected);
  EXPECT_EQ(strict.stats().references, t.references);
}

INSTANTIATE_TEST_SUITE_P(
    Shared, RealTraces,
    ::testing::Values(RealTrace{"mooncake__synthetic_trace.jsonl", Format::mooncake, 512, false, 3993, 121877, 43924, 0},
                      RealTrace{"dynamo__mooncake_trace_1000.jsonl", Format::mooncake, 512, false, 1000, 19686, 12207, 0},
                      RealTrace{"dynamo__pi_request_trace.jsonl.gz", Format::dynamo, 16, true, 17, 4163, 1183, 44}),
    [](const auto &tp) {
      std::string n = tp.param.file;
      return n.substr(0, n.find('.'));
    });

// Fields besides the ids: timestamps in seconds, lengths, Dynamo sessions (ids above 2^63).
TEST(Reader, RequestFields) {
  Reader m(data_dir() + "dynamo__mooncake_trace_1000.jsonl");
  Request q;
  ASSERT_TRUE(m.next(q));
  EXPECT_EQ(q.index, 0u);
  EXPECT_EQ(q.line, 1u);
  EXPECT_EQ(q.timestamp_s, 0.0);
  EXPECT_EQ(q.input_tokens, 6755u);
  EXPECT_EQ(q.output_tokens, 500u);
  EXPECT_FALSE(q.has_session);
  EXPECT_TRUE(q.attention.empty());

  std::string path = data_dir() + "dynamo__pi_request_trace.jsonl.gz";
  auto lines = lines_of(gunzip(path));
  Reader d(path);
  std::set<uint64_t> sessions;
  bool above_2_63 = false;
  while (d.next(q)) {
    json j = json::parse(lines.at(q.line - 1));
    EXPECT_EQ(j["event"]["event_type"], "request_end");
    EXPECT_DOUBLE_EQ(q.timestamp_s, j["timestamp"].get<double>() / 1000.0);
    EXPECT_EQ(q.input_tokens, j["event"]["request"]["replay"]["input_length"].get<uint64_t>());
    EXPECT_EQ(q.output_tokens, j["event"]["request"]["output_tokens"].get<uint64_t>());
    EXPECT_TRUE(q.has_session);
    EXPECT_EQ(q.has_parent, j["event"]["agent_context"].contains("parent_session_id"));
    sessions.insert(q.session);
    for (uint64_t id : q.blocks) above_2_63 |= id > (uint64_t{1} << 63);
  }
  EXPECT_TRUE(above_2_63);
  std::set<std::string> names;
  for (auto &l : lines) {
    json j = json::parse(l);
    if (j["event"]["event_type"] == "request_end") names.insert(j["event"]["agent_context"]["session_id"]);
  }
  EXPECT_EQ(sessions.size(), names.size());
}

// Our Qwen-Bailian fixture: chat ids become sessions, -1 parents none, timestamps stay seconds.
TEST(Reader, BailianFixture) {
  std::string path = data_dir() + "bailian_ours.jsonl";
  auto lines = lines_of(cxlt_test::read_file(path));
  Reader r(path);
  EXPECT_EQ(r.format(), Format::bailian);
  EXPECT_EQ(r.block_size_tokens(), 16u);
  Request q;
  uint64_t n = 0, parents = 0;
  while (r.next(q)) {
    json j = json::parse(lines.at(n));
    EXPECT_EQ(q.line, n + 1);
    EXPECT_TRUE(q.has_session);
    EXPECT_EQ(q.session, j["chat_id"].get<uint64_t>());
    int64_t parent = j["parent_chat_id"];
    EXPECT_EQ(q.has_parent, parent >= 0);
    if (parent >= 0) {
      EXPECT_EQ(q.parent_session, static_cast<uint64_t>(parent));
      ++parents;
    }
    EXPECT_DOUBLE_EQ(q.timestamp_s, j["timestamp"].get<double>());
    EXPECT_EQ(std::vector<uint64_t>(q.blocks.begin(), q.blocks.end()), j["hash_ids"].get<std::vector<uint64_t>>());
    EXPECT_EQ(q.blocks.size(), (j["input_length"].get<uint64_t>() + 15) / 16);
    ++n;
  }
  EXPECT_EQ(n, lines.size());
  EXPECT_GT(parents, 0u);
}

TEST(Reader, BlockSizeOptions) {
  EXPECT_EQ(Reader(data_dir() + "mooncake__synthetic_trace.jsonl", {.block_size_tokens = 256}).block_size_tokens(), 256u);
  EXPECT_EQ(Reader(data_dir() + "bailian_ours.jsonl", {.block_size_tokens = 32}).block_size_tokens(), 32u);
  // Dynamo and attention traces carry their block size; a different one is refused.
  EXPECT_EQ(Reader(data_dir() + "dynamo__pi_request_trace.jsonl.gz", {.block_size_tokens = 16}).block_size_tokens(), 16u);
  Error e = thrown([] { Reader(data_dir() + "dynamo__pi_request_trace.jsonl.gz", {.block_size_tokens = 64}); });
  EXPECT_EQ(e.code(), CXLT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(e.what(), "trace_block_size 16")) << e.what();
  e = thrown([] { Reader(data_dir() + "attention_small.jsonl", {.block_size_tokens = 512}); });
  EXPECT_EQ(e.code(), CXLT_ERROR_INVALID_ARGUMENT);
}

// --- Gzip and detection -----------------------------------------------------------------------

// A gzip copy of a plain trace reads to the same stream, from a file and from memory; several
// gzip members in a row are one stream.
TEST(Reader, GzipIsReadDirectly) {
  std::string plain = cxlt_test::read_file(data_dir() + "dynamo__mooncake_trace_1000.jsonl");
  const cxlt_test::TempDir tmp("trace-gz");
  const std::string path = tmp / "members.gz";
  size_t half = plain.size() / 2;
  for (int members = 1; members <= 2; ++members) {
    gzFile g = gzopen(path.c_str(), "wb");
    if (members == 1) {
      gzwrite(g, plain.data(), static_cast<unsigned>(plain.size()));
      gzclose(g);
    } else {
      gzwrite(g, plain.data(), static_cast<unsigned>(half));
      gzclose(g);
      g = gzopen(path.c_str(), "ab");
      gzwrite(g, plain.data() + half, static_cast<unsigned>(plain.size() - half));
      gzclose(g);
    }
    Reader a(path), b = Reader::from_memory(plain);
    EXPECT_TRUE(a.compressed());
    EXPECT_FALSE(b.compressed());
    EXPECT_EQ(a.format(), Format::mooncake);
    EXPECT_EQ(read_all(a), read_all(b)) << members << " member(s)";
    EXPECT_EQ(a.stats().malformed, 0u);
    EXPECT_EQ(a.stats().bytes, plain.size());
    Reader c = Reader::from_memory(cxlt_test::read_file(path));
    EXPECT_TRUE(c.compressed());
    EXPECT_EQ(read_all(c).size(), 1000u);
  }
}

TEST(Reader, DetectsEveryFormatFromContent) {
  struct Case {
    const char *file;
    Format format;
  };
  for (Case c : {Case{"mooncake__synthetic_trace.jsonl", Format::mooncake}, Case{"bailian_ours.jsonl", Format::bailian},
                 Case{"dynamo__pi_request_trace.jsonl.gz", Format::dynamo}, Case{"dynamo_malformed.jsonl", Format::dynamo},
                 Case{"attention_small.jsonl", Format::attention}, Case{"mooncake_crlf.jsonl", Format::mooncake},
                 Case{"mooncake_malformed.jsonl", Format::mooncake}})
    EXPECT_EQ(Reader(data_dir() + c.file).format(), c.format) << c.file;
  // A line before the first valid one that is not JSON does not stop detection (lenient), but
  // does in strict mode; an object of unknown shape is refused.
  EXPECT_EQ(Reader::from_memory("garbage\n{\"hash_ids\":[1]}\n").format(), Format::mooncake);
  Error e = thrown([] { Reader::from_memory("garbage\n{\"hash_ids\":[1]}\n", {.strict = true}, "x.jsonl"); });
  EXPECT_EQ(e.code(), CXLT_ERROR_CORRUPT);
  EXPECT_TRUE(contains(e.what(), "x.jsonl:1:")) << e.what();
  e = thrown([] { Reader::from_memory("{\"tokens\":[1,2]}\n", {}, "y.jsonl"); });
  EXPECT_EQ(e.code(), CXLT_ERROR_CORRUPT);
  EXPECT_TRUE(contains(e.what(), "y.jsonl:1:")) << e.what();
  EXPECT_TRUE(contains(e.what(), "hash_ids")) << e.what();

  // Names.
  for (Format f : {Format::mooncake, Format::bailian, Format::dynamo, Format::attention})
    EXPECT_EQ(parse_format(format_name(f)), f);
  EXPECT_EQ(parse_format("Qwen"), Format::bailian);
  e = thrown([] { (void)parse_format("vllm"); });
  EXPECT_EQ(e.code(), CXLT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(e.what(), "vllm")) << e.what();
}

// --- Malformed lines --------------------------------------------------------------------------

struct BadLine {
  uint64_t line;
  const char *reason;  // a substring of the reported reason
};

// Reads `file` leniently (every bad line skipped, counted and kept with its reason), then
// strictly (the first bad line throws, naming the file, the line and the reason).
static void check_malformed(const std::string &file, uint64_t requests, uint64_t other,
                            const std::vector<BadLine> &bad, std::optional<Format> fmt = std::nullopt) {
  std::string path = data_dir() + file;
  Reader r(path, {.format = fmt});
  uint64_t n = 0;
  Request q;
  while (r.next(q)) ++n;
  EXPECT_EQ(n, requests) << file;
  const ReaderStats &s = r.stats();
  EXPECT_EQ(s.requests, requests);
  EXPECT_EQ(s.other_events, other) << file;
  EXPECT_EQ(s.malformed, bad.size()) << file;
  ASSERT_EQ(s.issues.size(), bad.size()) << file;
  for (size_t i = 0; i < bad.size(); ++i) {
    EXPECT_EQ(s.issues[i].line, bad[i].line) << file << ": " << s.issues[i].reason;
    EXPECT_TRUE(contains(s.issues[i].reason, bad[i].reason))
        << file << ":" << s.issues[i].line << ": '" << s.issues[i].reason << "' lacks '" << bad[i].reason << "'";
  }
  Reader strict(path, {.format = fmt, .strict = true});
  Error e = thrown([&] {
    while (strict.next(q)) {
    }
  });
  EXPECT_EQ(e.code(), CXLT_ERROR_CORRUPT);
  std::string where = path + ":" + std::to_string(bad.at(0).line) + ": ";
  EXPECT_TRUE(contains(e.what(), where)) << e.what();
  EXPECT_TRUE(contains(e.what(), bad.at(0).reason)) << e.what();
}

TEST(Malformed, Mooncake) {
  check_malformed("mooncake_malformed.jsonl", 4, 0,
                  {{2, "expected a JSON object"},
                   {3, "missing field \"hash_ids\""},
                   {4, "hash_ids: expected an array"},
                   {5, "hash_ids element 1: 2.5 is not an integer"},
                   {6, "hash_ids element 1: negative value -2"},
                   {7, "hash_ids: expected ',' or ']'"},
                   {8, "expected ',' or '}' after an object member"},
                   {9, "leading zero"},
                   {12, "18446744073709551616 exceeds 2^64-1"},
                   {14, "unexpected data after the JSON object"},
                   {15, "duplicate field \"hash_ids\""},
                   {17, "the last line has no newline"}});
  // The valid lines around them are read exactly, escaped keys included.
  Reader r(data_dir() + "mooncake_malformed.jsonl");
  auto got = read_all(r);
  std::vector<std::vector<uint64_t>> want = {{0, 1}, {0, 2, 3}, {18446744073709551615ull, 0}, {7, 8}};
  EXPECT_EQ(got, want);
  EXPECT_EQ(r.stats().lines, 17u);
  EXPECT_EQ(r.stats().empty_lines, 1u);
  EXPECT_EQ(r.stats().references, 9u);
}

TEST(Malformed, Bailian) {
  check_malformed("bailian_malformed.jsonl", 2, 0,
                  {{2, "missing field \"chat_id\""},
                   {3, "parent_chat_id: -5"},
                   {4, "chat_id: expected a non-negative integer"},
                   {5, "timestamp: expected a number"}});
}

TEST(Malformed, Dynamo) {
  check_malformed("dynamo_malformed.jsonl", 2, 2,
                  {{3, "without event.request.replay.input_sequence_hashes"},
                   {4, "expected a JSON object"},
                   {5, "missing field \"event.event_type\""},
                   {6, "trace_block_size 32 differs from the trace's 16"},
                   {7, "unterminated object"}});
  Reader r(data_dir() + "dynamo_malformed.jsonl");
  Request q;
  ASSERT_TRUE(r.next(q));
  EXPECT_EQ(q.blocks[0], 18000000000000000000ull);
  uint64_t root = q.session;
  ASSERT_TRUE(r.next(q));
  EXPECT_EQ(q.line, 8u);
  EXPECT_NE(q.session, root);
  EXPECT_EQ(q.blocks.size(), 3u);
}

TEST(Malformed, Attention) {
  check_malformed("attention_malformed.jsonl", 2, 0,
                  {{3, "seq has 2 entries but count has 1"},
                   {4, "count adds up to more than the 2 entries"},
                   {5, "attn has 1 entries but blocks has 2"},
                   {6, "attn element 0 is 1.5"},
                   {7, "step 0 does not come after step 0"},
                   {8, "missing field \"attn\""},
                   {9, "a second header line"}});
}

// A file read as the wrong format: each line is reported, none is a request.
TEST(Malformed, WrongFormatGiven) {
  Reader r(data_dir() + "dynamo__mooncake_trace_1000.jsonl", {.format = Format::dynamo, .issues_kept = 3});
  Request q;
  EXPECT_FALSE(r.next(q));
  EXPECT_EQ(r.stats().malformed, 1000u);
  ASSERT_EQ(r.stats().issues.size(), 3u);
  EXPECT_EQ(issue_lines(r.stats()), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_TRUE(contains(r.stats().issues[0].reason, "missing field \"event\""));
}

TEST(Malformed, LineLongerThanTheLimit) {
  std::string text = "{\"hash_ids\":[1]}\n{\"hash_ids\":[" + std::string(5000, '1') + "]}\n{\"hash_ids\":[2]}\n";
  Reader r = Reader::from_memory(text, {.format = Format::mooncake, .max_line_bytes = 1000});
  auto got = read_all(r);
  EXPECT_EQ(got, (std::vector<std::vector<uint64_t>>{{1}, {2}}));
  ASSERT_EQ(r.stats().issues.size(), 1u);
  EXPECT_EQ(r.stats().issues[0].line, 2u);
  EXPECT_TRUE(contains(r.stats().issues[0].reason, "longer than 1000 bytes"));
}

// --- Damaged and foreign files ----------------------------------------------------------------

// A gzip file cut short: every complete line before the cut is read, then one issue names the
// truncation; strict mode throws it.
TEST(Damaged, TruncatedGzip) {
  std::string path = data_dir() + "truncated.jsonl.gz";
  bool complete = true;
  std::string text = gunzip(path, &complete);
  ASSERT_FALSE(complete);
  text.resize(text.rfind('\n') + 1);  // only whole lines count
  auto want = nlohmann_requests(text, true);
  ASSERT_GT(want.size(), 0u);
  Reader r(path);
  EXPECT_EQ(read_all(r), want);
  ASSERT_EQ(r.stats().malformed, 1u);
  EXPECT_EQ(r.stats().issues[0].line, lines_of(text).size() + 1);
  EXPECT_TRUE(contains(r.stats().issues[0].reason, "truncated")) << r.stats().issues[0].reason;
  Reader strict(path, {.strict = true});
  Error e = thrown([&] { read_all(strict); });
  EXPECT_EQ(e.code(), CXLT_ERROR_CORRUPT);
  EXPECT_TRUE(contains(e.what(), "truncated")) << e.what();
  EXPECT_TRUE(contains(e.what(), "truncated.jsonl.gz:")) << e.what();
}

TEST(Damaged, GzipWithBadChecksum) {
  Reader r(data_dir() + "bad_crc.jsonl.gz");
  EXPECT_EQ(read_all(r).size(), 2u);  // the data decodes; the trailer then fails its check
  ASSERT_EQ(r.stats().malformed, 1u);
  EXPECT_TRUE(contains(r.stats().issues[0].reason, "gzip data damaged")) << r.stats().issues[0].reason;
  Error e = thrown([] {
    Reader s(data_dir() + "bad_crc.jsonl.gz", {.strict = true});
    read_all(s);
  });
  EXPECT_EQ(e.code(), CXLT_ERROR_CORRUPT);
}

TEST(Damaged, GzipFollowedByGarbage) {
  // A valid member, then bytes that are not gzip.
  std::string text = "{\"hash_ids\":[1]}\n";
  uLongf cap = compressBound(static_cast<uLong>(text.size())) + 64;
  std::string out(cap, '\0');
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  z.next_in = reinterpret_cast<Bytef *>(text.data());
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef *>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  ASSERT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  Reader r = Reader::from_memory(out + "junk after the stream");
  EXPECT_EQ(read_all(r).size(), 1u);
  ASSERT_EQ(r.stats().malformed, 1u);
  EXPECT_TRUE(contains(r.stats().issues[0].reason, "trailing garbage"));
}

TEST(Damaged, EmptyFile) {
  Error e = thrown([] { Reader(data_dir() + "empty.jsonl"); });
  EXPECT_EQ(e.code(), CXLT_ERROR_CORRUPT);
  EXPECT_TRUE(contains(e.what(), "empty")) << e.what();
  Reader r(data_dir() + "empty.jsonl", {.format = Format::mooncake, .strict = true});
  Request q;
  EXPECT_FALSE(r.next(q));
  EXPECT_EQ(r.stats().lines, 0u);
  // An attention trace needs its header.
  e = thrown([] { Reader(data_dir() + "empty.jsonl", {.format = Format::attention}); });
  EXPECT_EQ(e.code(), CXLT_ERROR_CORRUPT);
}

TEST(Damaged, BinaryGarbage) {
  std::string path = data_dir() + "garbage.bin";
  Error e = thrown([&] { Reader r(path); });
  EXPECT_EQ(e.code(), CXLT_ERROR_CORRUPT);
  EXPECT_TRUE(contains(e.what(), "garbage.bin")) << e.what();
  Reader r(path, {.format = Format::mooncake});
  Request q;
  EXPECT_FALSE(r.next(q));
  EXPECT_GT(r.stats().malformed, 0u);
  EXPECT_EQ(r.stats().malformed + r.stats().empty_lines, r.stats().lines);
  Reader s(path, {.format = Format::dynamo, .strict = true});
  EXPECT_EQ(thrown([&] { s.next(q); }).code(), CXLT_ERROR_CORRUPT);
}

TEST(Damaged, MissingFileAndDirectory) {
  Error e = thrown([] { Reader(data_dir() + "no_such_trace.jsonl"); });
  EXPECT_EQ(e.code(), CXLT_ERROR_IO);
  EXPECT_TRUE(contains(e.what(), "no_such_trace.jsonl")) << e.what();
  EXPECT_EQ(thrown([] { Reader dir(data_dir()); }).code(), CXLT_ERROR_IO);
  // A FIFO is refused at once (without waiting for a writer): it could not be rewound.
  const cxlt_test::TempDir tmp("trace-fifo");
  const std::string fifo = tmp / "fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  e = thrown([&] { Reader r(fifo); });
  EXPECT_EQ(e.code(), CXLT_ERROR_IO);
  EXPECT_TRUE(contains(e.what(), "not a regular file")) << e.what();
}

TEST(Reader, CrlfLineEndings) {
  Reader r(data_dir() + "mooncake_crlf.jsonl");
  EXPECT_EQ(read_all(r), (std::vector<std::vector<uint64_t>>{{1, 2, 3}, {1, 4}}));
  EXPECT_EQ(r.stats().empty_lines, 1u);
  EXPECT_EQ(r.stats().malformed, 0u);
}

// Our attention fixture, field by field.
TEST(Reader, AttentionFixture) {
  Reader r(data_dir() + "attention_small.jsonl");
  EXPECT_TRUE(r.has_attention());
  EXPECT_EQ(r.block_size_tokens(), 16u);
  EXPECT_TRUE(contains(r.header(), "\"version\":1"));
  Request q;
  ASSERT_TRUE(r.next(q));
  EXPECT_EQ(q.step, 0u);
  EXPECT_EQ(q.line, 2u);
  EXPECT_TRUE(std::isnan(q.timestamp_s));
  EXPECT_EQ(std::vector<uint64_t>(q.sequences.begin(), q.sequences.end()), (std::vector<uint64_t>{0, 0, 1}));
  EXPECT_EQ(std::vector<uint64_t>(q.blocks.begin(), q.blocks.end()), (std::vector<uint64_t>{10, 11, 20}));
  EXPECT_EQ(std::vector<float>(q.attention.begin(), q.attention.end()), (std::vector<float>{0.75f, 0.25f, 1.0f}));
  EXPECT_EQ(std::vector<uint64_t>(q.created.begin(), q.created.end()), (std::vector<uint64_t>{10, 11, 20}));
  EXPECT_TRUE(q.finished.empty());
  ASSERT_TRUE(r.next(q));
  EXPECT_EQ(q.step, 1u);
  EXPECT_EQ(std::vector<uint64_t>(q.finished.begin(), q.finished.end()), (std::vector<uint64_t>{1}));
  ASSERT_TRUE(r.next(q));
  EXPECT_EQ(q.step, 3u);
  EXPECT_TRUE(q.blocks.empty());
  EXPECT_TRUE(q.created.empty());
  EXPECT_FALSE(r.next(q));
  EXPECT_EQ(r.stats().references, 7u);
  // A header of another version or tag is refused, whatever the mode.
  Error e = thrown([] {
    Reader::from_memory("{\"format\":\"cxltier-attention\",\"version\":2,\"block_size_tokens\":16}\n", {}, "v2");
  });
  EXPECT_EQ(e.code(), CXLT_ERROR_CORRUPT);
  EXPECT_TRUE(contains(e.what(), "version 2")) << e.what();
  e = thrown([] { Reader::from_memory("{\"step\":0}\n", {.format = Format::attention}, "nohdr"); });
  EXPECT_TRUE(contains(e.what(), "nohdr:1: attention trace header")) << e.what();
}

// --- Differential fuzzing against nlohmann::json ----------------------------------------------

namespace {

// The oracle: a Mooncake line is a request exactly when it is one JSON object whose hash_ids is
// an array of integers in [0, 2^64), whose timestamp (if any) is a number and whose
// input_length/output_length (if any) are such integers.
bool oracle_accepts(const std::string &line) {
  json j;
  try {
    j = json::parse(line);
  } catch (const json::exception &) {
    return false;
  }
  if (!j.is_object() || !j.contains("hash_ids") || !j["hash_ids"].is_array()) return false;
  for (auto &v : j["hash_ids"])
    if (!v.is_number_unsigned()) return false;
  if (j.contains("timestamp") && !(j["timestamp"].is_number() && std::isfinite(j["timestamp"].get<double>()))) return false;
  for (const char *k : {"input_length", "output_length"})
    if (j.contains(k) && !j[k].is_number_unsigned()) return false;
  return true;
}

}  // namespace

TEST(Fuzz, MutatedLinesAgreeWithNlohmann) {
  auto seeds = lines_of(cxlt_test::read_file(data_dir() + "dynamo__mooncake_trace_1000.jsonl"));
  seeds.resize(50);
  seeds.push_back(R"({"hash_ids": [1, 2], "meta": {"a": [true, false, null, -1.5e3, "x\u00e9\n"]}, "timestamp": 0.5})");
  std::mt19937_64 rng(42);  // the test's own inputs; the library never uses <random>
  const std::string alphabet = "{}[],:\"\\-+.eE0123456789 \ttrufalsn\x01\x7f\xc3\xa9\xff/u";
  int agree = 0, accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s = seeds[rng() % seeds.size()];
    int edits = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < edits && !s.empty(); ++k) {
      size_t at = rng() % s.size();
      char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 4) {
        case 0: s[at] = c; break;
        case 1: s.erase(at, 1 + rng() % 3); break;
        case 2: s.insert(at, 1, c); break;
        default: s.resize(at); break;
      }
    }
    if (s.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank: not a line
    bool want = oracle_accepts(s);
    Reader r = Reader::from_memory(s + "\n", {.format = Format::mooncake});
    Request q;
    bool got = r.next(q);
    EXPECT_EQ(got, want) << "line: " << s << "\nreason: " << (r.stats().issues.empty() ? "" : r.stats().issues[0].reason);
    if (got == want) ++agree;
    if (got) {
      ++accepted;
      EXPECT_EQ(std::vector<uint64_t>(q.blocks.begin(), q.blocks.end()),
                json::parse(s)["hash_ids"].get<std::vector<uint64_t>>());
    } else {
      EXPECT_EQ(r.stats().malformed, 1u);
    }
    if (HasFailure()) break;
  }
  EXPECT_GT(accepted, 100);  // the mutations keep some lines valid, so both sides are exercised
}

// Dynamo lines nest deeper; any line the reader takes as a request must be valid JSON, and
// random bytes never crash it.
TEST(Fuzz, NestedLinesAndRandomBytes) {
  std::string path = data_dir() + "dynamo__pi_request_trace.jsonl.gz";
  auto seeds = lines_of(gunzip(path));
  std::mt19937_64 rng(7);
  for (int i = 0; i < 3000; ++i) {
    std::string s = seeds[rng() % seeds.size()];
    for (int k = 0; k < 2 && !s.empty(); ++k) {
      size_t at = rng() % s.size();
      if (rng() % 2) s[at] = static_cast<char>(rng() % 256);
      else s.erase(at, 1);
    }
    for (char &c : s)
      if (c == '\n') c = ' ';
    Reader r = Reader::from_memory(s + "\n", {.format = Format::dynamo});
    Request q;
    if (r.next(q)) {
      EXPECT_TRUE(json::accept(s)) << s;
    }
  }
  for (int i = 0; i < 2000; ++i) {
    std::string s(rng() % 300, '\0');
    static const char kBytes[] = "{}[]\",:0123456789-eE.\\ntrufals \x80";
    for (char &c : s) c = kBytes[rng() % (sizeof kBytes - 1)];
    for (Format f : {Format::mooncake, Format::bailian, Format::dynamo}) {
      Reader r = Reader::from_memory(s, {.format = f});
      Request q;
      while (r.next(q)) {
      }
      EXPECT_EQ(r.stats().bytes, s.size());
    }
  }
  // Deep nesting is refused, not a stack overflow.
  std::string deep = "{\"hash_ids\":[1],\"x\":" + std::string(100000, '[') + std::string(100000, ']') + "}\n";
  Reader r = Reader::from_memory(deep, {.format = Format::mooncake});
  Request q;
  EXPECT_FALSE(r.next(q));
  ASSERT_EQ(r.stats().issues.size(), 1u);
  EXPECT_TRUE(contains(r.stats().issues[0].reason, "nesting deeper")) << r.stats().issues[0].reason;
}
