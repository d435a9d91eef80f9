#include "io/regex.h"

#include <algorithm>
#include <array>

#include "base/error.h"
#include "io/unicode.h"

namespace reprise::io {

namespace {

using unicode::Category;

// Bounds that keep a hostile pattern from exhausting memory or time: the
// pattern's length and nesting, a counted repetition's count, the size of
// the compiled program, and the backtracking steps per character searched.
constexpr size_t kMaxPatternBytes = 4096;
constexpr int kMaxDepth = 64;
constexpr int kMaxRepeat = 1000;
constexpr size_t kMaxProgram = 1 << 16;
constexpr int64_t kBacktracksPerByte = 1000;
constexpr int64_t kMinBacktracks = 1'000'000;

constexpr uint32_t bit(Category c) { return 1u << int(c); }
constexpr uint32_t kLetters = bit(Category::Lu) | bit(Category::Ll) | bit(Category::Lt) |
                              bit(Category::Lm) | bit(Category::Lo);
constexpr uint32_t kMarks = bit(Category::Mn) | bit(Category::Mc) | bit(Category::Me);
// \w: Oniguruma's Unicode word characters.
constexpr uint32_t kWord = kLetters | kMarks | bit(Category::Nd) | bit(Category::Pc);

// \p{name}: a category's two-letter name, or its group's first letter.
constexpr const char* kCategoryNames[unicode::kCategoryCount] = {
    "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
    "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"};

uint32_t category_mask(std::string_view name) {
  uint32_t mask = 0;
  for (int c = 0; c < unicode::kCategoryCount; ++c) {
    const std::string_view full = kCategoryNames[c];
    if (name == full || (name.size() == 1 && name[0] == full[0])) mask |= 1u << c;
  }
  return mask;
}

bool is_ascii_letter(char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

}  // namespace

bool Regex::CharClass::contains(char32_t cp) const {
  for (const auto& [lo, hi] : ranges) {
    if (cp >= lo && cp <= hi) return true;
  }
  if ((space && unicode::is_white_space(cp)) || (not_space && !unicode::is_white_space(cp))) {
    return true;
  }
  if (categories == 0 && not_categories.empty()) return false;
  const uint32_t b = 1u << int(unicode::category(cp));
  if (categories & b) return true;
  return std::any_of(not_categories.begin(), not_categories.end(),
                     [&](uint32_t mask) { return (mask & b) == 0; });
}

bool Regex::CharClass::matches(char32_t cp) const {
  if (cp < 128) return (ascii[cp >> 6] >> (cp & 63)) & 1;
  return contains(cp) != negated;
}

// ---- parsing: pattern -> syntax tree ----------------------------------------

namespace {

struct Node {
  enum class Kind : uint8_t { empty, literal, char_class, any, concat, alternate, repeat, look };
  Kind kind = Kind::empty;
  char32_t cp = 0;       // literal: the code point; char_class: index into the classes
  bool fold = false;     // literal under (?i)
  bool negate = false;   // look: (?!...)
  bool greedy = true;    // repeat
  int min = 0, max = 0;  // repeat; max < 0: unbounded
  std::vector<Node> children;
};

bool nullable(const Node& n) {
  switch (n.kind) {
    case Node::Kind::empty:
    case Node::Kind::look:
      return true;
    case Node::Kind::literal:
    case Node::Kind::char_class:
    case Node::Kind::any:
      return false;
    case Node::Kind::concat:
      return std::all_of(n.children.begin(), n.children.end(), nullable);
    case Node::Kind::alternate:
      return std::any_of(n.children.begin(), n.children.end(), nullable);
    case Node::Kind::repeat:
      return n.min == 0 || nullable(n.children[0]);
  }
  return true;
}

}  // namespace

struct Regex::Parser {
  std::string_view p;
  size_t pos = 0;
  int depth = 0;
  bool fold = false;  // inside (?i:...)
  std::vector<CharClass>& classes;

  [[noreturn]] void fail(const std::string& what) const {
    REPRISE_FAIL("regex '", p, "': ", what, " at offset ", pos);
  }
  bool at_end() const { return pos >= p.size(); }
  char peek() const { return p[pos]; }
  bool eat(char c) {
    if (!at_end() && p[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  char32_t next_code_point() {
    const unicode::Decoded d = unicode::decode_utf8(p, pos);
    if (d.cp == unicode::kInvalidByte) fail("a byte that is not UTF-8");
    pos += d.length;
    return d.cp;
  }

  Node alternation() {
    if (++depth > kMaxDepth) fail("nesting deeper than 64 groups");
    Node alt{.kind = Node::Kind::alternate};
    alt.children.push_back(concatenation());
    while (eat('|')) alt.children.push_back(concatenation());
    --depth;
    if (alt.children.size() == 1) return std::move(alt.children[0]);
    return alt;
  }

  Node concatenation() {
    Node cat{.kind = Node::Kind::concat};
    while (!at_end() && peek() != '|' && peek() != ')') cat.children.push_back(repetition());
    if (cat.children.size() == 1) return std::move(cat.children[0]);
    if (cat.children.empty()) return Node{};
    return cat;
  }

  int number() {
    if (at_end() || peek() < '0' || peek() > '9') fail("a number in {n,m}");
    int v = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + (p[pos++] - '0');
      if (v > kMaxRepeat) fail("a repetition count above 1000");
    }
    return v;
  }

  Node repetition() {
    Node atom_node = atom();
    if (at_end()) return atom_node;
    int min = 0, max = 0;
    switch (peek()) {
      case '?':
        min = 0, max = 1;
        break;
      case '*':
        min = 0, max = -1;
        break;
      case '+':
        min = 1, max = -1;
        break;
      case '{':
        ++pos;
        min = max = number();
        if (eat(',')) max = (!at_end() && peek() == '}') ? -1 : number();
        if (at_end() || peek() != '}') fail("'}' closing a counted repetition");
        if (max >= 0 && max < min) fail("a repetition {n,m} with m < n");
        break;
      default:
        return atom_node;
    }
    ++pos;
    Node rep{.kind = Node::Kind::repeat, .min = min, .max = max};
    if (eat('?')) rep.greedy = false;
    if (!at_end() && (peek() == '?' || peek() == '*' || peek() == '+' || peek() == '{')) {
      fail("a second quantifier (possessive and nested quantifiers are not supported)");
    }
    if ((max < 0 || max > 1) && nullable(atom_node)) {
      fail("a repeated expression that can match the empty string");
    }
    rep.children.push_back(std::move(atom_node));
    return rep;
  }

  Node group() {
    Node inner;
    if (eat('?')) {
      if (eat(':')) {
        inner = alternation();
      } else if (eat('i')) {
        if (!eat(':')) fail("':' after (?i (inline flags need a group)");
        const bool outer = fold;
        fold = true;
        inner = alternation();
        fold = outer;
      } else if (eat('=') || eat('!')) {
        const bool negate = p[pos - 1] == '!';
        inner = Node{.kind = Node::Kind::look, .negate = negate};
        inner.children.push_back(alternation());
      } else {
        fail("':', 'i:', '=' or '!' after '(?'");
      }
    } else {
      inner = alternation();  // a capture group: nothing is captured
    }
    if (!eat(')')) fail("')'");
    return inner;
  }

  Node class_node(CharClass c) {
    if (fold) fail("a character class inside (?i:...) (only ASCII literals fold)");
    for (char32_t cp = 0; cp < 128; ++cp) {
      if (c.contains(cp) != c.negated) c.ascii[cp >> 6] |= uint64_t(1) << (cp & 63);
    }
    classes.push_back(std::move(c));
    return Node{.kind = Node::Kind::char_class, .cp = char32_t(classes.size() - 1)};
  }

  Node literal(char32_t cp) {
    if (fold && cp >= 128) fail("a non-ASCII literal inside (?i:...) (only ASCII letters fold)");
    const bool letter = fold && is_ascii_letter(cp);
    return Node{.kind = Node::Kind::literal, .cp = letter ? (cp | 0x20) : cp, .fold = letter};
  }

  uint32_t hex_digits(size_t count, bool braced) {
    uint32_t v = 0;
    size_t n = 0;
    while (!at_end() && (braced ? peek() != '}' : n < count)) {
      const int d = unicode::hex_digit(p[pos]);
      if (d < 0) fail("a hexadecimal digit");
      v = v * 16 + uint32_t(d);
      if (v > 0x10FFFF) fail("a code point at most U+10FFFF");
      ++pos, ++n;
    }
    if (n == 0 || (!braced && n != count)) fail("hexadecimal digits");
    if (braced && !eat('}')) fail("'}' after \\x{...");
    if (v >= 0xD800 && v <= 0xDFFF) fail("a code point that is not a surrogate");
    return v;
  }

  // After a backslash: fills `c` with a class escape (\s, \p{L}, ...) and
  // returns true, or returns false and sets `cp` to the escaped character.
  bool escape(CharClass& c, char32_t& cp) {
    if (at_end()) fail("a character after '\\'");
    const char e = p[pos++];
    switch (e) {
      case 's':
        c.space = true;
        return true;
      case 'S':
        c.not_space = true;
        return true;
      case 'd':
        c.categories |= bit(Category::Nd);
        return true;
      case 'D':
        c.not_categories.push_back(bit(Category::Nd));
        return true;
      case 'w':
        c.categories |= kWord;
        return true;
      case 'W':
        c.not_categories.push_back(kWord);
        return true;
      case 'p':
      case 'P': {
        if (!eat('{')) fail("'{' after \\p");
        const size_t close = p.find('}', pos);
        if (close == std::string_view::npos) fail("'}' after \\p{");
        const uint32_t mask = category_mask(p.substr(pos, close - pos));
        if (mask == 0) fail("a general category name (L, Lu, N, Nd, ...) in \\p{...}");
        pos = close + 1;
        if (e == 'p') {
          c.categories |= mask;
        } else {
          c.not_categories.push_back(mask);
        }
        return true;
      }
      case 't':
        cp = '\t';
        return false;
      case 'n':
        cp = '\n';
        return false;
      case 'r':
        cp = '\r';
        return false;
      case 'f':
        cp = '\f';
        return false;
      case 'v':
        cp = '\v';
        return false;
      case 'x':
        cp = eat('{') ? hex_digits(0, true) : hex_digits(2, false);
        return false;
      case 'u':
        cp = hex_digits(4, false);
        return false;
      default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9') ||
            uint8_t(e) >= 128) {
          --pos;
          fail(
              "a supported escape (\\s \\S \\d \\D \\w \\W \\p \\P \\t \\n \\r \\f \\v \\x \\u or "
              "escaped punctuation)");
        }
        cp = char32_t(e);
        return false;
    }
  }

  char32_t class_member_literal() {
    if (eat('\\')) {
      CharClass unused;
      char32_t cp = 0;
      if (escape(unused, cp)) fail("a single character as a range end");
      return cp;
    }
    return next_code_point();
  }

  Node bracket_class() {
    CharClass c;
    c.negated = eat('^');
    bool first = true;
    while (at_end() || peek() != ']' || first) {
      if (at_end()) fail("']' closing a character class");
      if (peek() == '[') fail("a class item ([ inside a class, nested classes, is not supported)");
      first = false;
      char32_t lo = 0;
      if (eat('\\')) {
        if (escape(c, lo)) continue;
      } else {
        lo = next_code_point();
      }
      char32_t hi = lo;
      if (!at_end() && peek() == '-' && pos + 1 < p.size() && p[pos + 1] != ']') {
        ++pos;
        hi = class_member_literal();
        if (hi < lo) fail("a range [a-b] with a <= b");
      }
      c.ranges.emplace_back(lo, hi);
    }
    ++pos;  // ']'
    return class_node(std::move(c));
  }

  Node atom() {
    const char c = peek();
    switch (c) {
      case '(':
        ++pos;
        return group();
      case '[':
        ++pos;
        return bracket_class();
      case '.':
        ++pos;
        return Node{.kind = Node::Kind::any};
      case '\\': {
        ++pos;
        CharClass cls;
        char32_t cp = 0;
        if (escape(cls, cp)) return class_node(std::move(cls));
        return literal(cp);
      }
      case '^':
      case '$':
        fail("no anchor (^ and $ are not supported)");
      case '*':
      case '+':
      case '?':
      case '{':
        fail("an expression before a quantifier");
      default:
        return literal(next_code_point());
    }
  }
};

// ---- compiling: syntax tree -> program ---------------------------------------

struct Regex::Compiler {
  std::vector<Inst>& code;
  const std::string& pattern;

  int32_t emit(Inst inst) {
    REPRISE_CHECK(code.size() < kMaxProgram, "regex '", pattern,
                  "': compiles to more than 65536 instructions");
    code.push_back(inst);
    return int32_t(code.size() - 1);
  }
  int32_t here() const { return int32_t(code.size()); }

  void compile(const Node& n) {
    switch (n.kind) {
      case Node::Kind::empty:
        return;
      case Node::Kind::literal:
        emit({.op = n.fold ? Op::ascii_fold : Op::literal, .cp = n.cp});
        return;
      case Node::Kind::char_class:
        emit({.op = Op::char_class, .cp = n.cp});
        return;
      case Node::Kind::any:
        emit({.op = Op::any});
        return;
      case Node::Kind::concat:
        for (const Node& c : n.children) compile(c);
        return;
      case Node::Kind::alternate: {
        std::vector<int32_t> to_end;
        for (size_t i = 0; i + 1 < n.children.size(); ++i) {
          const int32_t split = emit({.op = Op::split});
          code[split].x = here();
          compile(n.children[i]);
          to_end.push_back(emit({.op = Op::jump}));
          code[split].y = here();
        }
        compile(n.children.back());
        for (int32_t j : to_end) code[j].x = here();
        return;
      }
      case Node::Kind::repeat:
        compile_repeat(n);
        return;
      case Node::Kind::look: {
        const int32_t look = emit({.op = Op::look, .negate = n.negate});
        compile(n.children[0]);
        emit({.op = Op::match});
        code[look].x = here();
        return;
      }
    }
  }

  // A split whose preferred branch is the next instruction (greedy) or
  // `exit` (lazy); `exit` is patched by the caller.
  int32_t loop_split(bool greedy) {
    const int32_t s = emit({.op = Op::split});
    (greedy ? code[s].x : code[s].y) = s + 1;
    return s;
  }
  void set_exit(int32_t split, bool greedy, int32_t exit) {
    (greedy ? code[split].y : code[split].x) = exit;
  }

  void compile_repeat(const Node& n) {
    const Node& body = n.children[0];
    for (int i = 0; i < n.min; ++i) compile(body);
    if (n.max < 0) {  // L: split(body, exit); body; jump L
      const int32_t s = loop_split(n.greedy);
      compile(body);
      emit({.op = Op::jump, .x = s});
      set_exit(s, n.greedy, here());
      return;
    }
    std::vector<int32_t> splits;  // each optional copy may be skipped to the end
    for (int i = n.min; i < n.max; ++i) {
      splits.push_back(loop_split(n.greedy));
      compile(body);
    }
    for (int32_t s : splits) set_exit(s, n.greedy, here());
  }
};

Regex::Regex(std::string_view pattern) : pattern_(pattern) {
  REPRISE_CHECK(pattern.size() <= kMaxPatternBytes, "regex: a pattern of ", pattern.size(),
                " bytes, more than the ", kMaxPatternBytes, " accepted");
  Parser parser{.p = pattern_, .classes = classes_};
  Node tree = parser.alternation();
  if (!parser.at_end()) parser.fail("the end of the pattern (an unmatched ')')");
  Compiler compiler{.code = code_, .pattern = pattern_};
  compiler.compile(tree);
  compiler.emit({.op = Op::match});
  set_first_characters();
}

void Regex::set_first_characters() {
  // first[pc]: the ASCII characters a match from pc can start with, all of
  // them where it may be empty or start with a lookahead. Only splits and
  // jumps lead on without consuming, and they form no cycle (a repeated
  // expression cannot be empty), so each pc is computed once.
  using Set = std::array<uint64_t, 2>;
  constexpr Set kAll = {~uint64_t(0), ~uint64_t(0)};
  std::vector<Set> first(code_.size(), kAll);
  std::vector<uint8_t> done(code_.size(), 0);
  std::function<Set(int32_t, int)> of = [&](int32_t pc, int depth) -> Set {
    if (done[pc]) return first[pc];
    const Inst& in = code_[pc];
    Set set = kAll;
    auto only = [&](char32_t c) { set[c >> 6] |= uint64_t(1) << (c & 63); };
    if (depth > 4096) return kAll;  // a long chain of alternatives: no filter
    switch (in.op) {
      case Op::literal:
        set = {0, 0};
        if (in.cp < 128) only(in.cp);
        break;
      case Op::ascii_fold:
        set = {0, 0};
        only(in.cp);
        only(in.cp & ~char32_t(0x20));
        break;
      case Op::char_class:
        set = {classes_[in.cp].ascii[0], classes_[in.cp].ascii[1]};
        break;
      case Op::split: {
        const Set a = of(in.x, depth + 1), b = of(in.y, depth + 1);
        set = {a[0] | b[0], a[1] | b[1]};
        break;
      }
      case Op::jump:
        set = of(in.x, depth + 1);
        break;
      case Op::any:
      case Op::look:
      case Op::match:
        break;
    }
    first[pc] = set;
    done[pc] = 1;
    return set;
  };
  for (Inst& in : code_) {
    if (in.op == Op::split) {
      const Set s = of(in.x, 0);
      in.x_first[0] = s[0], in.x_first[1] = s[1];
    }
  }
}

// ---- matching ------------------------------------------------------------------

bool Regex::match_at(std::string_view text, int32_t pc, size_t pos, size_t& end, Stack& stack,
                     int64_t& budget) const {
  const size_t base = stack.size();
  for (;;) {
    const Inst& in = code_[pc];
    bool ok = false;
    switch (in.op) {
      case Op::literal:
      case Op::ascii_fold:
      case Op::char_class:
      case Op::any:
        if (pos < text.size()) {
          const unicode::Decoded d = unicode::decode_utf8(text, pos);
          switch (in.op) {
            case Op::literal:
              ok = d.cp == in.cp;
              break;
            case Op::ascii_fold:
              ok = (d.cp | 0x20) == in.cp;
              break;
            case Op::char_class:
              ok = classes_[in.cp].matches(d.cp);
              break;
            default:
              ok = d.cp != '\n';
          }
          if (ok) {
            pos += d.length;
            ++pc;
            continue;
          }
        }
        break;
      case Op::split:
        if (pos < text.size() && uint8_t(text[pos]) < 128) {
          const uint8_t c = uint8_t(text[pos]);
          if (((in.x_first[c >> 6] >> (c & 63)) & 1) == 0) {
            pc = in.y;
            continue;
          }
        }
        stack.emplace_back(in.y, pos);
        pc = in.x;
        continue;
      case Op::jump:
        pc = in.x;
        continue;
      case Op::look: {
        // Lookahead is atomic, as in Oniguruma: its own alternatives are
        // dropped once it has matched.
        size_t unused = 0;
        if (match_at(text, pc + 1, pos, unused, stack, budget) != in.negate) {
          pc = in.x;
          continue;
        }
        break;
      }
      case Op::match:
        end = pos;
        stack.resize(base);
        return true;
    }
    // Backtrack to the most recent untried alternative.
    if (stack.size() == base) return false;
    REPRISE_CHECK(--budget >= 0, "regex '", pattern_,
                  "': gave up after too many backtracking steps (over ", kBacktracksPerByte,
                  " per byte of text)");
    pc = stack.back().first;
    pos = stack.back().second;
    stack.pop_back();
  }
}

void Regex::for_each_match(std::string_view text,
                           const std::function<void(size_t, size_t)>& found) const {
  Stack stack;
  int64_t budget = kMinBacktracks + kBacktracksPerByte * int64_t(text.size());
  size_t start = 0;
  bool after_match = false;  // a match ended at `start`
  while (start <= text.size()) {
    size_t begin = start, end = 0;
    while (!match_at(text, 0, begin, end, stack, budget)) {
      if (begin == text.size()) return;
      begin += unicode::decode_utf8(text, begin).length;
    }
    if (end == begin && after_match && begin == start) {
      // An empty match where the last one ended: move on by one character.
      if (start == text.size()) return;
      start += unicode::decode_utf8(text, start).length;
      after_match = false;
      continue;
    }
    found(begin, end);
    after_match = true;
    if (end == text.size() && end == begin) return;
    start = end;
  }
}

}  // namespace reprise::io
