// Hugging Face tokenizer files from rotor's tokenizer (checkpoint/hf_tokenizer.h).
#include "checkpoint/hf_tokenizer.h"

#include <algorithm>
#include <boost/archive/iterators/base64_from_binary.hpp>
#include <boost/archive/iterators/transform_width.hpp>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "checkpoint/sentencepiece_model.pb.h"
#include "core/error.h"
#include "core/io.h"
#include "core/json_io.h"
#include "data/sentencepiece.h"

namespace fs = std::filesystem;

namespace rotor::checkpoint {

namespace {

using json_io::Json;
using Piece = proto::SpmModel::Piece;

constexpr const char* kControl[] = {"<pad>", "<unk>", "<s>", "</s>"};  // ids 0..3

std::string base64(const std::string& bytes) {
  using namespace boost::archive::iterators;
  using It = base64_from_binary<transform_width<std::string::const_iterator, 6, 8>>;
  std::string out(It(bytes.begin()), It(bytes.end()));
  out.append((3 - bytes.size() % 3) % 3, '=');
  return out;
}

// Where each UTF-8 character of `s` starts (and s.size()).
std::vector<size_t> char_starts(const std::string& s) {
  std::vector<size_t> at;
  for (size_t i = 0; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) at.push_back(i);
  at.push_back(s.size());
  return at;
}

// A regular expression (Oniguruma, as `tokenizers` compiles them) matching
// `text` literally.
std::string regex_literal(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// One of the pieces, longest first: a user-defined piece is matched at the
// longest that starts there, as SentencePiece and rotor's byte tokenizer do.
std::string alternatives(std::vector<std::string> pieces) {
  std::stable_sort(pieces.begin(), pieces.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  std::string out;
  for (const auto& p : pieces) out += (out.empty() ? "" : "|") + regex_literal(p);
  return out;
}

Json regex(const std::string& r) {
  return Json{{"Regex", r}};
}

Json replace(Json pattern, const std::string& content) {
  return Json{{"type", "Replace"}, {"pattern", std::move(pattern)}, {"content", content}};
}

Json added_token(int64_t id, const std::string& content, bool normalized, bool special) {
  return Json{{"id", id},          {"content", content}, {"single_word", false},
              {"lstrip", false},   {"rstrip", false},    {"normalized", normalized},
              {"special", special}};
}

// The TemplateProcessing of `t`: `around` names the tokens (their text and id).
struct TemplateTokens {
  std::string cls, sep;  // Encoder: [CLS], [SEP]
  int64_t cls_id = -1, sep_id = -1;
  std::string boundary;  // CausalLm: </s> or the line break's byte piece
  int64_t boundary_id = -1;
};

Json post_processor(HfTokenizerTemplate t, const TemplateTokens& k) {
  const auto special = [](const std::string& id, int type) {
    return Json{{"SpecialToken", {{"id", id}, {"type_id", type}}}};
  };
  const auto seq = [](const char* id, int type) {
    return Json{{"Sequence", {{"id", id}, {"type_id", type}}}};
  };
  const auto entry = [](const std::string& token, int64_t id) {
    return Json{{"id", token}, {"ids", Json::array({id})}, {"tokens", Json::array({token})}};
  };
  Json p{{"type", "TemplateProcessing"}};
  if (t == HfTokenizerTemplate::Encoder) {
    p["single"] = Json::array({special(k.cls, 0), seq("A", 0), special(k.sep, 0)});
    p["pair"] = Json::array(
        {special(k.cls, 0), seq("A", 0), special(k.sep, 0), seq("B", 1), special(k.sep, 1)});
    p["special_tokens"] = Json{{k.cls, entry(k.cls, k.cls_id)}, {k.sep, entry(k.sep, k.sep_id)}};
  } else {
    p["single"] = Json::array({special(k.boundary, 0), seq("A", 0)});
    p["pair"] =
        Json::array({special(k.boundary, 0), seq("A", 0), special(k.boundary, 0), seq("B", 0)});
    p["special_tokens"] = Json{{k.boundary, entry(k.boundary, k.boundary_id)}};
  }
  return p;
}

Json tokenizer_json(Json added, Json normalizer, Json pre_tokenizer, Json post, Json decoder,
                    Json model) {
  return Json{{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens", std::move(added)},
              {"normalizer", std::move(normalizer)},
              {"pre_tokenizer", std::move(pre_tokenizer)},
              {"post_processor", std::move(post)},
              {"decoder", std::move(decoder)},
              {"model", std::move(model)}};
}

// The four reserved tokens, special and matched in the raw text (Hugging
// Face's convention; rotor reads them as characters).
Json control_tokens() {
  Json added = Json::array();
  for (int64_t i = 0; i < 4; ++i) added.push_back(added_token(i, kControl[i], false, true));
  return added;
}

// The template's tokens among the pieces `id_of` knows (an error naming the
// file when one is missing).
TemplateTokens template_tokens(HfTokenizerTemplate t, const std::string& path,
                               const std::function<int64_t(const std::string&)>& id_of,
                               const std::string& boundary) {
  TemplateTokens k;
  if (t == HfTokenizerTemplate::Encoder) {
    k.cls = "[CLS]";
    k.sep = "[SEP]";
    k.cls_id = id_of(k.cls);
    k.sep_id = id_of(k.sep);
    if (k.cls_id < 0 || k.sep_id < 0)
      ROTOR_FAIL("export: tokenizer {} has no [CLS] or [SEP] piece: not a masked-LM tokenizer",
                 path);
  } else {
    k.boundary = boundary;
    k.boundary_id = id_of(boundary);
    ROTOR_CHECK(k.boundary_id >= 0, "export: tokenizer {} has no {}", path, boundary);
  }
  return k;
}

// GPT-2's byte <-> character table, which the ByteLevel pre-tokenizer and
// decoder of `tokenizers` use: printable Latin-1 bytes stand for
// themselves, the others for U+0100 onwards, in byte order.
std::string byte_char(unsigned char b) {
  const auto printable = [](int c) {
    return (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
  };
  int code = b;
  if (!printable(b)) {
    code = 256;
    for (int c = 0; c < b; ++c) code += !printable(c);
  }
  std::string out;
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
  return out;
}

Json byte_tokenizer_json(const std::string& path, HfTokenizerTemplate t) {
  const data::Tokenizer tok = data::Tokenizer::load(path);
  const std::vector<std::string>& symbols = tok.symbols();
  Json vocab = Json::object();
  for (int64_t i = 0; i < 4; ++i) vocab[kControl[i]] = i;
  Json added = control_tokens();
  for (size_t k = 0; k < symbols.size(); ++k) {
    const int64_t id = 4 + static_cast<int64_t>(k);
    vocab[symbols[k]] = id;
    // Matched in the raw text, as rotor's byte tokenizer matches them.
    added.push_back(added_token(id, symbols[k], false, true));
  }
  for (int b = 0; b < 256; ++b) vocab[byte_char(static_cast<unsigned char>(b))] = tok.byte_id(b);
  const auto id_of = [&](const std::string& piece) -> int64_t {
    return vocab.contains(piece) ? vocab.at(piece).get<int64_t>() : -1;
  };
  const Json bytes{{"type", "ByteLevel"},
                   {"add_prefix_space", false},
                   {"trim_offsets", false},
                   {"use_regex", false}};
  const Json model{{"type", "BPE"},
                   {"dropout", nullptr},
                   {"unk_token", nullptr},
                   {"continuing_subword_prefix", nullptr},
                   {"end_of_word_suffix", nullptr},
                   {"fuse_unk", false},
                   {"byte_fallback", false},
                   {"vocab", vocab},
                   {"merges", Json::array()}};
  // A byte LM's documents are lines: its prompts start after a line break.
  const TemplateTokens k = template_tokens(t, path, id_of, byte_char('\n'));
  return tokenizer_json(added, nullptr, bytes, post_processor(t, k), bytes, model);
}

Json spm_tokenizer_json(const std::string& path, HfTokenizerTemplate t) {
  proto::SpmModel m;
  if (!m.ParseFromString(read_file(path)) || m.pieces_size() == 0)
    ROTOR_FAIL("export: {} is not a SentencePiece model", path);
  const proto::SpmTrainerSpec& trainer = m.trainer_spec();
  const proto::SpmNormalizerSpec& ns = m.normalizer_spec();
  const bool bpe = trainer.model_type() == proto::SpmTrainerSpec::BPE;
  if (!bpe && trainer.model_type() != proto::SpmTrainerSpec::UNIGRAM)
    ROTOR_FAIL(
        "export: {} is a SentencePiece {} model; the Hugging Face tokenizer is written for "
        "unigram and bpe models",
        path, trainer.model_type() == proto::SpmTrainerSpec::WORD ? "word" : "char");
  if (trainer.treat_whitespace_as_suffix())
    ROTOR_FAIL(
        "export: {} treats whitespace as a suffix (treat_whitespace_as_suffix), which the "
        "Hugging Face tokenizer is not written for",
        path);

  std::vector<std::string> user;
  std::unordered_map<std::string, int64_t> ids;
  int64_t unk = -1;
  Json added = Json::array();
  for (int64_t i = 0; i < m.pieces_size(); ++i) {
    const Piece& p = m.pieces(static_cast<int>(i));
    ids.emplace(p.piece(), i);
    if (p.type() == Piece::UNKNOWN && unk < 0) unk = i;
    if (p.type() == Piece::CONTROL || p.type() == Piece::UNKNOWN)
      added.push_back(added_token(i, p.piece(), false, true));
    if (p.type() == Piece::USER_DEFINED) {
      // Matched after normalization (which leaves the piece as it is, below):
      // the "▁" before it stays a piece of its own, as in SentencePiece.
      added.push_back(added_token(i, p.piece(), true, true));
      user.push_back(p.piece());
    }
  }
  if (unk < 0) ROTOR_FAIL("export: {} has no unknown piece", path);

  // SentencePiece's normalizer, in its order.
  Json norms = Json::array();
  if (!ns.precompiled_charsmap().empty())
    norms.push_back(
        {{"type", "Precompiled"}, {"precompiled_charsmap", base64(ns.precompiled_charsmap())}});
  if (ns.remove_extra_whitespaces()) {
    norms.push_back(replace(regex("\\A +| +\\z"), ""));
    norms.push_back(replace(regex(" {2,}"), " "));
  }
  const std::string space = ns.escape_whitespaces() ? "\xE2\x96\x81" : " ";  // U+2581
  if (ns.escape_whitespaces()) norms.push_back(replace(Json{{"String", " "}}, space));
  if (ns.add_dummy_prefix()) {
    // The prefix goes before every text but a user-defined piece alone: the
    // added tokens are normalized too, and must stay themselves to be found.
    const std::string rx =
        user.empty() ? std::string("\\A") : "\\A(?!(?:" + alternatives(user) + ")\\z)";
    norms.push_back(replace(regex(rx), space));
  }
  // Pieces never cross a user-defined piece.
  Json pre = nullptr;
  if (!user.empty())
    pre = {{"type", "Split"},
           {"pattern", regex(alternatives(user))},
           {"behavior", "Isolated"},
           {"invert", false}};

  Json model;
  if (bpe) {
    // SentencePiece BPE merges the adjacent pair whose union is the normal
    // piece of highest score; as a rank list: every split of each normal
    // piece into two normal pieces, by score, id, then split point.
    Json vocab = Json::object();
    for (int64_t i = 0; i < m.pieces_size(); ++i) {
      const std::string& piece = m.pieces(static_cast<int>(i)).piece();
      if (!vocab.contains(piece)) vocab[piece] = i;
    }
    std::unordered_map<std::string, int64_t> normal;
    for (int64_t i = 0; i < m.pieces_size(); ++i) {
      const Piece& p = m.pieces(static_cast<int>(i));
      if (p.type() == Piece::NORMAL) normal.emplace(p.piece(), i);
    }
    std::vector<std::tuple<float, int64_t, size_t, std::string, std::string>> ranked;
    for (const auto& [piece, i] : normal) {
      const std::vector<size_t> at = char_starts(piece);
      for (size_t c = 1; c + 1 < at.size(); ++c) {
        std::string left = piece.substr(0, at[c]), right = piece.substr(at[c]);
        if (normal.count(left) && normal.count(right))
          ranked.emplace_back(-m.pieces(static_cast<int>(i)).score(), i, at[c], std::move(left),
                              std::move(right));
      }
    }
    std::sort(ranked.begin(), ranked.end());
    Json merges = Json::array();
    for (const auto& r : ranked) merges.push_back(std::get<3>(r) + " " + std::get<4>(r));
    model = {{"type", "BPE"},
             {"dropout", nullptr},
             {"unk_token", m.pieces(static_cast<int>(unk)).piece()},
             {"continuing_subword_prefix", nullptr},
             {"end_of_word_suffix", nullptr},
             {"fuse_unk", true},
             {"byte_fallback", trainer.byte_fallback()},
             {"vocab", vocab},
             {"merges", merges}};
  } else {
    Json vocab = Json::array();
    for (const Piece& p : m.pieces()) vocab.push_back(Json::array({p.piece(), p.score()}));
    model = {{"type", "Unigram"},
             {"unk_id", unk},
             {"vocab", vocab},
             {"byte_fallback", trainer.byte_fallback()}};
  }
  // Decoding: "▁" back to spaces, byte pieces back to bytes, the dummy prefix off.
  Json decoders = Json::array({replace(Json{{"String", space}}, " ")});
  if (trainer.byte_fallback()) decoders.push_back({{"type", "ByteFallback"}});
  decoders.push_back({{"type", "Fuse"}});
  if (ns.add_dummy_prefix())
    decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});

  const auto id_of = [&](const std::string& piece) -> int64_t {
    auto it = ids.find(piece);
    return it == ids.end() ? -1 : it->second;
  };
  const TemplateTokens k = template_tokens(t, path, id_of, kControl[data::kEosId]);
  return tokenizer_json(added, Json{{"type", "Sequence"}, {"normalizers", norms}}, pre,
                        post_processor(t, k), Json{{"type", "Sequence"}, {"decoders", decoders}},
                        model);
}

}  // namespace

Json hf_tokenizer_json(const std::string& path, HfTokenizerTemplate t) {
  if (data::Tokenizer::kind_of_file(path) == data::TokenizerKind::Bytes)
    return byte_tokenizer_json(path, t);
  return spm_tokenizer_json(path, t);
}

void write_hf_tokenizer(const std::string& path, const std::string& output_dir,
                        HfTokenizerTemplate t, int64_t max_positions, HfExportResult& r) {
  if (!fs::exists(path)) {
    r.notes.push_back(
        "tokenizer: the checkpoint has no spm.model; no tokenizer files written: give "
        "transformers the ids rotor uses");
    return;
  }
  const bool bytes = data::Tokenizer::kind_of_file(path) == data::TokenizerKind::Bytes;
  const Json tokenizer = hf_tokenizer_json(path, t);
  const bool encoder = t == HfTokenizerTemplate::Encoder;
  Json tc = Json::object();
  tc["tokenizer_class"] = "PreTrainedTokenizerFast";
  if (encoder) {
    // A classifier or masked LM reads its token types (BERT's segments).
    tc["model_input_names"] = Json::array({"input_ids", "token_type_ids", "attention_mask"});
    tc["unk_token"] = "<unk>";
    tc["pad_token"] = "<pad>";
    tc["cls_token"] = "[CLS]";
    tc["sep_token"] = "[SEP]";
    tc["mask_token"] = "[MASK]";
  } else {
    tc["model_input_names"] = Json::array({"input_ids", "attention_mask"});
    // The boundary that starts a document is also what ends one (GPT-2's
    // <|endoftext|>): rotor's </s>; a byte LM has none and ends nothing.
    if (!bytes) {
      tc["bos_token"] = "</s>";
      tc["eos_token"] = "</s>";
    }
    tc["unk_token"] = "<unk>";
    tc["pad_token"] = "<pad>";
  }
  tc["clean_up_tokenization_spaces"] = false;
  tc["model_max_length"] = max_positions;
  Json st = Json::object();
  for (const auto& [key, value] : tc.items())
    if (key.size() > 6 && key.substr(key.size() - 6) == "_token") st[key] = value;

  atomic_write_file(output_dir + "/tokenizer.json", tokenizer.dump(1) + "\n");
  atomic_write_file(output_dir + "/tokenizer_config.json", tc.dump(2) + "\n");
  atomic_write_file(output_dir + "/special_tokens_map.json", st.dump(2) + "\n");
  r.files.insert(r.files.end(),
                 {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"});
  if (!bytes) {
    atomic_write_file(output_dir + "/spiece.model", read_file(path));
    r.files.push_back("spiece.model");
  }
  const std::string what = bytes ? "rotor's byte tokenizer (byte-level, UTF-8 bytes)"
                                 : "rotor's SentencePiece model as a tokenizers pipeline";
  r.notes.push_back(fmt::format(
      "tokenizer: tokenizer.json, {}: AutoTokenizer.from_pretrained(DIR) gives rotor's ids "
      "({}) in transformers 4.x and 5.x; a text holding <s> </s> <unk> <pad> literally reads "
      "them as special tokens",
      what,
      encoder ? "[CLS] a [SEP] b [SEP]"
      : bytes ? "a line break, then the text"
              : "</s>, then the text"));
}

}  // namespace rotor::checkpoint
