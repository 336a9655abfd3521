// Splitting one PTX module into independent pieces (ptx_split.hpp; docs/splitting.md).
//
// Three steps, each linear in the text or bounded by options.max_walk_steps:
//  1. Items: the module-scope declarations and definitions, each a byte range of the text, found with
//     the lexer the header parser uses (ptx_lexer.hpp), so that comments and strings cannot fool it.
//     Anything at module scope the splitter does not know stops the split (one piece, a reason).
//  2. References: the names each item mentions that are module-scope symbols. A function body's
//     callee of a direct `call` is a call; any other mention of a function's name takes its address.
//  3. Grouping: one walk per kernel over the reference graph (an explicit stack, never recursion).
//     Kernels that reach the same state (a variable that exists once per module) or another kernel
//     are joined (union-find); so are all kernels that take a function's address or call through a
//     pointer, because a pointer made in one piece is meaningless in another. Functions and copied
//     declarations go into every piece that reaches them.
// Every piece is checked with parse_ptx before it is returned: the pieces' kernels must be the
// module's, each exactly once, or the module comes back whole.
#include "fatpack/core/ptx_split.hpp"

#include "fatpack/core/input.hpp"
#include "inputs/inputs_internal.hpp"
#include "inputs/ptx_lexer.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <iterator>
#include <numeric>
#include <optional>
#include <queue>
#include <unordered_map>
#include <variant>

namespace fatpack::core {
namespace {

using detail::lexer;
using detail::token;

constexpr std::uint32_t none = ~std::uint32_t(0);

// The `.extern .func` declarations nvcc emits in whole-program (non -rdc) PTX: system calls the JIT
// itself resolves (printf, device malloc/free, assert). Any other `.extern` means relocatable PTX.
bool is_system_function(std::string_view name) {
  return name == "vprintf" || name == "malloc" || name == "free" || name == "__assertfail";
}

struct item {
  enum kind_t { file, debug_str, entry, func, variable } kind = variable;
  std::size_t begin = 0, end = 0;  // byte range in the text
  std::vector<std::string_view> names;
  bool has_body = false;    // entry/func: a definition, not a prototype
  bool is_state = false;    // variable: exists once per module (not .shared)
  bool in_every_piece = false;
};

struct symbol {
  std::vector<std::uint32_t> items;
  std::vector<std::uint32_t> refs;  // symbols it mentions (deduplicated)
  bool is_state = false;            // a module-scope variable that is not per-CTA shared memory
  bool is_entry = false;
  bool is_function = false;
  bool defined = false;
  bool makes_pointers = false;  // takes a function's address or calls through a pointer
};

// Why a module is not split; empty: split.
struct refusal {
  std::string reason;
  explicit operator bool() const { return !reason.empty(); }
};

class module_scanner {
 public:
  explicit module_scanner(std::string_view text) : text_(text), lex_(text, true) {}

  // Step 1. Fills items and header_end; a refusal for what it does not understand.
  refusal scan_items() {
    bool header_done = false;
    token t = lex_.next();
    while (t.kind != token::end) {
      if (t.kind == token::bad) return {"line " + std::to_string(t.line) + ": " + std::string(t.text)};
      if (t.kind != token::word)
        return {"line " + std::to_string(t.line) + ": '" + std::string(t.text) + "' at module scope"};
      const std::size_t begin = offset(t);
      if (t.text == ".version" || t.text == ".target" || t.text == ".address_size") {
        if (header_done) return {"line " + std::to_string(t.line) + ": " + std::string(t.text) + " after declarations"};
        token last = t;
        t = lex_.next();
        if (t.kind == token::word) last = t, t = lex_.next();
        while (t.kind == token::punct && t.text == ",") {  // .target sm_80, texmode_independent
          last = t;
          t = lex_.next();
          if (t.kind == token::word) last = t, t = lex_.next();
        }
        header_end_ = end_of(last);
        continue;
      }
      header_done = true;
      if (t.text == ".file") {  // .file 1 "name" [, timestamp, size]
        token last = t;
        t = lex_.next();
        if (t.kind == token::word) last = t, t = lex_.next();
        if (t.kind == token::string) last = t, t = lex_.next();
        while (t.kind == token::punct && t.text == ",") {
          last = t;
          t = lex_.next();
          if (t.kind == token::word) last = t, t = lex_.next();
        }
        add_item(item::file, begin, end_of(last), true);
        continue;
      }
      if (t.text == ".section") {
        const token name = lex_.next();
        if (name.kind != token::word || name.text != ".debug_str")
          return {"line " + std::to_string(t.line) + ": section " + std::string(name.text) +
                  ": only .debug_str is understood (-G writes .debug_info, whose DWARF refers to every "
                  "function, so no piece could hold it)"};
        token open = lex_.next();
        if (!(open.kind == token::punct && open.text == "{")) return {"line " + std::to_string(t.line) + ": .section without {"};
        if (refusal r = skip_to_close('{', '}')) return r;
        add_item(item::debug_str, begin, lex_.position(), true);
        t = lex_.next();
        continue;
      }
      if (refusal r = scan_declaration(t, begin)) return r;
      t = lex_.next();
    }
    return std::move(linkage_refusal_);
  }

  std::size_t header_end() const { return header_end_; }
  std::vector<item>& items() { return items_; }

 private:
  std::size_t offset(const token& t) const { return std::size_t(t.text.data() - text_.data()); }
  std::size_t end_of(const token& t) const { return offset(t) + t.text.size(); }
  void add_item(item::kind_t k, std::size_t begin, std::size_t end, bool every) {
    item it;
    it.kind = k;
    it.begin = begin;
    it.end = end;
    it.in_every_piece = every;
    items_.push_back(std::move(it));
  }
  // After an opening bracket: to just past its partner, counting nesting; a refusal at the end of text.
  refusal skip_to_close(char open, char close) {
    std::size_t depth = 1;
    for (token t = lex_.next(); t.kind != token::end; t = lex_.next()) {
      if (t.kind == token::bad) return {"line " + std::to_string(t.line) + ": " + std::string(t.text)};
      if (t.kind != token::punct) continue;
      if (t.text[0] == open) ++depth;
      if (t.text[0] == close && --depth == 0) return {};
    }
    return {std::string("unbalanced '") + open + "' at the end of the module"};
  }

  // A declaration or definition that starts with `t`: linkage, then .entry/.func/a state space.
  refusal scan_declaration(token t, std::size_t begin) {
    const std::size_t line = t.line;
    auto at = [&](const std::string& what) { return refusal{"line " + std::to_string(line) + ": " + what}; };
    // Linkage that marks relocatable PTX stops the split only after the whole module was scanned, so
    // that a -G module (which has both) is refused for its debug sections, the reason that matters.
    auto relocatable = [&](const std::string& what) {
      if (!linkage_refusal_) linkage_refusal_ = at(what + ": relocatable PTX (-rdc)");
    };
    bool visible = false, external = false;
    while (t.kind == token::word && (t.text == ".visible" || t.text == ".extern" || t.text == ".weak" || t.text == ".common")) {
      if (t.text == ".weak" || t.text == ".common") relocatable(std::string(t.text) + " linkage, which other modules may resolve");
      visible = visible || t.text == ".visible";
      external = external || t.text == ".extern";
      t = lex_.next();
    }
    if (t.kind != token::word) return at("a declaration without a kind");
    item it;
    it.begin = begin;
    if (t.text == ".entry" || t.text == ".func") {
      const bool is_entry = t.text == ".entry";
      it.kind = is_entry ? item::entry : item::func;
      t = lex_.next();
      if (!is_entry && t.kind == token::punct && t.text == "(") {  // the return parameters
        if (refusal r = skip_to_close('(', ')')) return r;
        t = lex_.next();
      }
      if (t.kind != token::word || t.text[0] == '.') return at("a function without a name");
      it.names.push_back(t.text);
      if (!is_entry && visible) relocatable(".visible .func " + std::string(t.text) + ", which other modules may call");
      if (external && !(!is_entry && is_system_function(t.text)))
        relocatable(".extern " + std::string(t.text) + ", defined in another module");
      // Parameters and performance directives, then `;` (a prototype) or the body.
      for (t = lex_.next(); t.kind != token::end; t = lex_.next()) {
        if (t.kind == token::bad) return at(std::string(t.text));
        if (t.kind != token::punct) continue;
        if (t.text == "(") {
          if (refusal r = skip_to_close('(', ')')) return r;
        } else if (t.text == ";") {
          break;
        } else if (t.text == "{") {
          if (refusal r = skip_to_close('{', '}')) return r;
          it.has_body = true;
          break;
        }
      }
      if (t.kind == token::end) return at("the module ends inside " + std::string(it.names[0]));
    } else if (t.text == ".global" || t.text == ".const" || t.text == ".shared" || t.text == ".local" ||
               t.text == ".tex" || t.text == ".texref" || t.text == ".surfref" || t.text == ".samplerref") {
      it.kind = item::variable;
      // Per-CTA shared memory is not state across kernels: each launch has its own, so the
      // declaration is copied, as for .extern .shared. Everything else is taken to exist once per
      // module (.local too, which is per thread: grouping by it is merely cautious).
      it.is_state = t.text != ".shared";
      if (visible) relocatable(".visible " + std::string(t.text) + " variable, which other modules may use");
      if (external && t.text != ".shared") relocatable(".extern " + std::string(t.text) + " variable, defined in another module");
      // Declarators: NAME [N]... [= initializer] {, NAME ...} ;  The name is the first word that is no
      // directive (types, .align N, .v4, .attribute(...) come before it).
      bool want_name = true;
      for (t = lex_.next(); t.kind != token::end; t = lex_.next()) {
        if (t.kind == token::bad) return at(std::string(t.text));
        if (t.kind == token::word) {
          if (t.text == ".align") {
            t = lex_.next();
            continue;
          }
          if (want_name && t.text[0] != '.') {
            it.names.push_back(t.text);
            want_name = false;
          }
          continue;
        }
        if (t.kind != token::punct) continue;
        if (t.text == "(" ) {
          if (refusal r = skip_to_close('(', ')')) return r;
        } else if (t.text == "{") {
          if (refusal r = skip_to_close('{', '}')) return r;
        } else if (t.text == ",") {
          want_name = true;
        } else if (t.text == ";") {
          break;
        }
      }
      if (t.kind == token::end) return at("the module ends inside a variable declaration");
      if (it.names.empty()) return at("a variable without a name");
    } else {
      return at("'" + std::string(t.text) + "' at module scope is not something the splitter knows");
    }
    it.end = lex_.position();
    items_.push_back(std::move(it));
    return {};
  }

  std::string_view text_;
  lexer lex_;
  std::vector<item> items_;
  std::size_t header_end_ = 0;
  refusal linkage_refusal_;
};

// Disjoint sets of kernels (union by size, path halving: no recursion).
class disjoint_sets {
 public:
  explicit disjoint_sets(std::size_t n) : parent_(n), size_(n, 1) { std::iota(parent_.begin(), parent_.end(), 0u); }
  std::uint32_t find(std::uint32_t x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  void unite(std::uint32_t a, std::uint32_t b) {
    a = find(a);
    b = find(b);
    if (a == b) return;
    if (size_[a] < size_[b]) std::swap(a, b);
    parent_[b] = a;
    size_[a] += size_[b];
  }

 private:
  std::vector<std::uint32_t> parent_;
  std::vector<std::uint32_t> size_;
};

class splitter {
 public:
  splitter(std::string_view text, const ptx_split_options& options) : text_(text), options_(options), scanner_(text) {}

  // The pieces, or a refusal (then the caller returns the module whole).
  std::variant<std::vector<ptx_piece>, refusal> run() {
    if (refusal r = scanner_.scan_items()) return r;
    if (refusal r = make_symbols()) return r;
    if (refusal r = resolve_references()) return r;
    if (kernels_.size() < 2) return std::vector<ptx_piece>{};  // nothing to split
    if (refusal r = group_kernels()) return r;
    return write_pieces();
  }
  std::uint64_t header_end() const { return scanner_.header_end(); }

 private:
  std::vector<item>& items() { return scanner_.items(); }

  refusal make_symbols() {
    for (std::uint32_t i = 0; i < items().size(); ++i) {
      item& it = items()[i];
      if (it.kind == item::variable) {
        // `.global .u32 a, b;`: one item, so one symbol for all its names (a piece holds both or neither).
        const std::uint32_t id = std::uint32_t(symbols_.size());
        for (std::string_view name : it.names)
          if (!ids_.emplace(name, id).second) return {"'" + std::string(name) + "' is declared twice"};
        symbols_.emplace_back();
        symbols_.back().items.push_back(i);
        symbols_.back().is_state = it.is_state;
        symbols_.back().defined = true;
        continue;
      }
      for (std::string_view name : it.names) {
        auto [pos, fresh] = ids_.emplace(name, std::uint32_t(symbols_.size()));
        if (fresh) symbols_.emplace_back();
        symbol& s = symbols_[pos->second];
        s.items.push_back(i);
        const bool fn = it.kind == item::entry || it.kind == item::func;
        if (s.items.size() > 1 && (!s.is_function || s.is_entry != (it.kind == item::entry)))
          return {"'" + std::string(name) + "' names two different kinds of symbol"};
        s.is_function = fn;
        s.is_entry = it.kind == item::entry;
        if (it.has_body) {
          if (s.defined) return {"'" + std::string(name) + "' is defined twice"};
          s.defined = true;
        }
        if (it.kind == item::entry && it.has_body) kernels_.push_back(pos->second);
      }
    }
    for (const symbol& s : symbols_)
      if (s.is_entry && !s.defined) return {"a kernel is declared but not defined"};
    return {};
  }

  // Step 2: each item's references, from a second pass of the lexer over its own bytes.
  refusal resolve_references() {
    std::vector<std::uint32_t> seen_stamp(symbols_.size(), none);
    for (std::uint32_t i = 0; i < items().size(); ++i) {
      const item& it = items()[i];
      if (it.kind == item::file || it.kind == item::debug_str || it.names.empty()) continue;
      const std::uint32_t self = ids_.at(it.names[0]);
      symbol& owner = symbols_[self];
      lexer lex(text_.substr(it.begin, it.end - it.begin), true);
      // Functions: only the body refers to anything (the header holds the name and parameters).
      // Variables: only initializers (after `=`).
      bool scanning = false;
      std::size_t depth = 0;  // brackets inside a variable's initializer
      int call_state = 0;  // 1: after a call word, 2: after its return list, expecting the callee
      for (token t = lex.next(); t.kind != token::end && t.kind != token::bad; t = lex.next()) {
        if (!scanning) {
          scanning = t.kind == token::punct && t.text == (it.kind == item::variable ? "=" : "{");
          continue;
        }
        if (t.kind == token::punct) {
          if (call_state == 1 && t.text == "(") {
            // The return list: skip to ')'.
            for (t = lex.next(); t.kind != token::end && !(t.kind == token::punct && t.text == ")"); t = lex.next()) {}
            call_state = 2;
          } else if (call_state == 2 && t.text == ",") {
          } else {
            call_state = 0;
          }
          if (it.kind == item::variable) {
            if (t.text == "{" || t.text == "(") ++depth;
            if ((t.text == "}" || t.text == ")") && depth > 0) --depth;
            if (t.text == "," && depth == 0) scanning = false;  // the next declarator's name follows
          }
          continue;
        }
        if (t.kind != token::word) continue;
        if (it.kind != item::variable && (t.text == "call" || t.text.substr(0, 5) == "call.")) {
          call_state = 1;
          continue;
        }
        const bool callee = call_state != 0;
        call_state = 0;
        auto found = ids_.find(t.text);
        if (found == ids_.end()) {
          if (callee) owner.makes_pointers = true;  // `call %rd5, ...`: through a pointer
          continue;
        }
        const std::uint32_t target = found->second;
        if (target == self) continue;
        if (symbols_[target].is_function && !symbols_[target].is_entry && !callee) owner.makes_pointers = true;
        if (callee && !symbols_[target].is_function) owner.makes_pointers = true;
        if (seen_stamp[target] != self) {
          seen_stamp[target] = self;
          owner.refs.push_back(target);
        }
      }
    }
    return {};
  }

  // One walk from `seeds` over the reference graph; calls visit(symbol) once per reached symbol.
  template <class Visit>
  bool walk(const std::vector<std::uint32_t>& seeds, std::uint32_t stamp, Visit&& visit) {
    stack_.clear();
    for (std::uint32_t s : seeds)
      if (mark_[s] != stamp) {
        mark_[s] = stamp;
        stack_.push_back(s);
      }
    while (!stack_.empty()) {
      const std::uint32_t s = stack_.back();
      stack_.pop_back();
      visit(s);
      for (std::uint32_t r : symbols_[s].refs) {
        if (++steps_ > options_.max_walk_steps) return false;
        if (mark_[r] != stamp) {
          mark_[r] = stamp;
          stack_.push_back(r);
        }
      }
    }
    return true;
  }

  // Step 3: the kernels' groups. Index kernels_.size() stands for the symbols no kernel reaches
  // (host-only variables, unused functions): they go with the first kernel's group.
  refusal group_kernels() {
    const std::uint32_t nk = std::uint32_t(kernels_.size());
    mark_.assign(symbols_.size(), none);
    std::vector<std::uint32_t> owner(symbols_.size(), none);
    std::vector<bool> reached(symbols_.size(), false);
    disjoint_sets sets(nk + 1);
    std::uint32_t pointer_kernel = none;
    auto visit_from = [&](std::uint32_t k) {
      return [&, k](std::uint32_t s) {
        reached[s] = true;
        const symbol& sym = symbols_[s];
        if (sym.is_state || sym.is_entry) {
          if (owner[s] == none) owner[s] = k;
          else sets.unite(k, owner[s]);
        }
        if (sym.makes_pointers) {
          if (pointer_kernel == none) pointer_kernel = k;
          else sets.unite(k, pointer_kernel);
        }
      };
    };
    for (std::uint32_t k = 0; k < nk; ++k)
      if (!walk({kernels_[k]}, k, visit_from(k))) return too_big();
    std::vector<std::uint32_t> rest;
    for (std::uint32_t s = 0; s < symbols_.size(); ++s)
      if (!reached[s]) rest.push_back(s);
    if (!walk(rest, nk, visit_from(nk))) return too_big();
    sets.unite(nk, 0);
    // Groups in the order of their first kernel.
    std::vector<std::uint32_t> group_of_root(nk + 1, none);
    for (std::uint32_t k = 0; k <= nk; ++k) {
      const std::uint32_t root = sets.find(k);
      if (group_of_root[root] == none) {
        group_of_root[root] = std::uint32_t(groups_.size());
        groups_.emplace_back();
      }
      groups_[group_of_root[root]].push_back(k);
    }
    rest_ = std::move(rest);
    return {};
  }

  refusal too_big() {
    return {"the call graph needs more than " + std::to_string(options_.max_walk_steps) + " steps to walk"};
  }

  std::vector<std::uint32_t> seeds_of(const std::vector<std::uint32_t>& group_kernels) const {
    std::vector<std::uint32_t> seeds;
    for (std::uint32_t k : group_kernels) {
      if (k < kernels_.size()) seeds.push_back(kernels_[k]);
      else seeds.insert(seeds.end(), rest_.begin(), rest_.end());
    }
    return seeds;
  }

  // The items a set of groups needs, in the module's order: the items every piece holds (listed once,
  // in every_piece_items_) merged with those its walk reaches. Nothing here looks at the module's other
  // items, so writing all pieces costs their size, not the number of pieces times the module's.
  std::optional<std::vector<std::uint32_t>> items_of(const std::vector<std::uint32_t>& seeds, std::uint32_t stamp) {
    std::vector<std::uint32_t> reached;
    bool ok = walk(seeds, stamp, [&](std::uint32_t s) {
      for (std::uint32_t i : symbols_[s].items) reached.push_back(i);
    });
    if (!ok) return std::nullopt;
    std::sort(reached.begin(), reached.end());
    reached.erase(std::unique(reached.begin(), reached.end()), reached.end());
    // .file and .debug_str items have no names, so no symbol lists them: the two lists are disjoint.
    std::vector<std::uint32_t> out;
    out.reserve(every_piece_items_.size() + reached.size());
    std::merge(every_piece_items_.begin(), every_piece_items_.end(), reached.begin(), reached.end(),
               std::back_inserter(out));
    return out;
  }

  std::variant<std::vector<ptx_piece>, refusal> write_pieces() {
    for (std::uint32_t i = 0; i < items().size(); ++i)
      if (items()[i].in_every_piece) every_piece_items_.push_back(i);
    // Pieces as lists of groups.
    std::vector<std::vector<std::uint32_t>> piece_groups;
    std::uint32_t stamp = std::uint32_t(kernels_.size()) + 1;
    if (options_.mode == ptx_split_options::granularity::per_kernel || options_.groups >= groups_.size()) {
      for (std::uint32_t g = 0; g < groups_.size(); ++g) piece_groups.push_back({g});
    } else {
      // Balanced by bytes: each group's bytes (its items, callees included), largest first into the
      // lightest piece; pieces then ordered by their first group.
      std::vector<std::pair<std::uint64_t, std::uint32_t>> sized;
      for (std::uint32_t g = 0; g < groups_.size(); ++g) {
        auto its = items_of(seeds_of(groups_[g]), stamp++);
        if (!its) return too_big();
        std::uint64_t bytes = 0;
        for (std::uint32_t i : *its) bytes += items()[i].end - items()[i].begin;
        sized.emplace_back(bytes, g);
      }
      std::stable_sort(sized.begin(), sized.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
      // The lightest piece, ties to the lowest index: a min-heap of (load, piece), so that many
      // groups into many pieces cost log(pieces) each, not a scan of all pieces.
      const std::size_t n = options_.groups;
      using load_t = std::pair<std::uint64_t, std::size_t>;
      std::priority_queue<load_t, std::vector<load_t>, std::greater<load_t>> lightest;
      for (std::size_t p = 0; p < n; ++p) lightest.emplace(0, p);
      piece_groups.resize(n);
      for (const auto& [bytes, g] : sized) {
        const auto [load, p] = lightest.top();
        lightest.pop();
        lightest.emplace(load + bytes, p);
        piece_groups[p].push_back(g);
      }
      for (auto& p : piece_groups) std::sort(p.begin(), p.end());
      std::sort(piece_groups.begin(), piece_groups.end());
    }
    if (piece_groups.size() < 2) return std::vector<ptx_piece>{};
    const std::uint64_t budget = std::uint64_t(options_.max_output_factor) * text_.size() + (std::uint64_t(1) << 20);
    std::uint64_t written = 0;
    std::vector<ptx_piece> pieces;
    for (const auto& groups : piece_groups) {
      std::vector<std::uint32_t> kernels;
      for (std::uint32_t g : groups) kernels.insert(kernels.end(), groups_[g].begin(), groups_[g].end());
      std::sort(kernels.begin(), kernels.end());
      auto its = items_of(seeds_of(kernels), stamp++);
      if (!its) return too_big();
      ptx_piece piece;
      for (std::uint32_t i : *its) piece.ranges.emplace_back(items()[i].begin, items()[i].end);
      const std::uint64_t size = ptx_piece_size(scanner_.header_end(), piece.ranges);
      written += size;
      if (written > budget)
        return refusal{"the pieces would hold more than " + std::to_string(options_.max_output_factor) +
                       " times the module's bytes (callees copied into many pieces)"};
      piece.text = assemble_ptx_piece(text_, scanner_.header_end(), piece.ranges);
      for (std::uint32_t i : *its) {
        if (items()[i].kind == item::variable && items()[i].is_state)
          for (std::string_view name : items()[i].names) piece.globals.emplace_back(name);
      }
      pieces.push_back(std::move(piece));
    }
    return pieces;
  }

  std::string_view text_;
  const ptx_split_options& options_;
  module_scanner scanner_;
  std::unordered_map<std::string_view, std::uint32_t> ids_;
  std::vector<symbol> symbols_;
  std::vector<std::uint32_t> kernels_;              // entry symbols with a body, in the module's order
  std::vector<std::vector<std::uint32_t>> groups_;  // kernel indices (kernels_.size(): the rest)
  std::vector<std::uint32_t> rest_;                 // symbols no kernel reaches
  std::vector<std::uint32_t> every_piece_items_;    // .file and .debug_str items, in the module's order
  std::vector<std::uint32_t> mark_;
  std::vector<std::uint32_t> stack_;
  std::size_t steps_ = 0;
};

}  // namespace

std::uint64_t ptx_piece_size(std::uint64_t header_end, const std::vector<std::pair<std::uint64_t, std::uint64_t>>& ranges) {
  std::uint64_t size = header_end + 1;
  for (const auto& [b, e] : ranges) size += e - b + 2;
  return size;
}

std::string assemble_ptx_piece(std::string_view module, std::uint64_t header_end,
                               const std::vector<std::pair<std::uint64_t, std::uint64_t>>& ranges) {
  std::string text;
  text.reserve(std::size_t(ptx_piece_size(header_end, ranges)));
  text.append(module.substr(0, std::size_t(header_end)));
  text += '\n';
  for (const auto& [b, e] : ranges) {
    text += '\n';
    text.append(module.substr(std::size_t(b), std::size_t(e - b)));
    text += '\n';
  }
  return text;
}

plan_piece_text rebuild_plan_piece(std::string_view module, const piece_plan& plan, std::size_t i) {
  plan_piece_text out;
  const piece_plan_piece& piece = plan.pieces[i];
  if (plan.header_end > module.size()) return out;
  for (const auto& [b, e] : piece.ranges)
    if (b > e || e > module.size()) return out;
  out.text = assemble_ptx_piece(module, plan.header_end, piece.ranges);
  out.xxh3 = xxh3(byte_span(out.text));
  out.matches = out.text.size() == piece.size && out.xxh3 == piece.xxh3;
  return out;
}

result<ptx_split_result> split_ptx(byte_span bytes, std::string_view source, const ptx_split_options& options) {
  const std::string src(source);
  if (options.mode == ptx_split_options::granularity::groups && options.groups == 0)
    return make_error(errc::invalid_argument, src + ": split into 0 groups");
  const byte_span text_bytes = detail::ptx_text(bytes);
  if (text_bytes.size > options.max_input_bytes)
    return make_error(errc::unsupported, src + ": " + std::to_string(text_bytes.size) + " bytes of PTX, more than the " +
                                             std::to_string(options.max_input_bytes) + " the splitter takes");
  // The header parser validates the text (NULs, comments, strings, .version, .target) and lists the
  // kernels the pieces must hold.
  auto whole = parse_ptx(text_bytes, source);
  if (!whole) return whole.error();
  const std::string_view text(reinterpret_cast<const char*>(text_bytes.data), text_bytes.size);

  ptx_split_result out;
  auto whole_module = [&](std::string reason) {
    ptx_piece only;  // the module whole: no globals or ranges to name (ptx_piece's "not split")
    only.text = std::string(text);
    only.kernels = whole->kernels;
    out.pieces.assign(1, std::move(only));
    out.unsplit_reason = std::move(reason);
    return out;
  };
  splitter s(text, options);
  auto pieces = s.run();
  if (auto* r = std::get_if<refusal>(&pieces)) return whole_module(std::move(r->reason));
  auto& list = std::get<std::vector<ptx_piece>>(pieces);
  if (list.empty()) return whole_module(whole->kernels.empty() ? "the module has no kernels" : "");

  // Every piece must be PTX with kernels, and together exactly the module's kernels, each once.
  std::vector<std::string> all;
  for (std::size_t i = 0; i < list.size(); ++i) {
    auto info = parse_ptx(byte_span(list[i].text), source);
    if (!info || info->kernels.empty()) return whole_module("internal check: piece " + std::to_string(i) + " is no PTX module with kernels");
    list[i].kernels = std::move(info->kernels);
    all.insert(all.end(), list[i].kernels.begin(), list[i].kernels.end());
  }
  std::vector<std::string> expected = whole->kernels;
  std::sort(all.begin(), all.end());
  std::sort(expected.begin(), expected.end());
  if (all != expected) return whole_module("internal check: the pieces' kernels are not the module's");
  out.pieces = std::move(list);
  out.header_end = s.header_end();
  return out;
}

piece_plan make_piece_plan(byte_span ptx, const std::vector<std::string>& kernels, std::string_view source) {
  piece_plan plan;
  if (kernels.size() < 2) return plan;
  auto split = split_ptx(ptx, source);
  if (!split || split->pieces.size() < 2) return plan;
  std::unordered_map<std::string_view, std::uint32_t> index;
  for (std::uint32_t i = 0; i < kernels.size(); ++i) index.emplace(kernels[i], i);
  plan.header_end = split->header_end;
  for (auto& p : split->pieces) {
    piece_plan_piece pp;
    pp.xxh3 = xxh3(byte_span(p.text));
    pp.size = p.text.size();
    pp.ranges = std::move(p.ranges);
    for (const auto& k : p.kernels) {
      auto it = index.find(k);
      if (it == index.end()) return piece_plan{};  // not the entry's kernel list: no plan
      pp.kernels.push_back(it->second);
    }
    pp.globals = std::move(p.globals);
    plan.pieces.push_back(std::move(pp));
  }
  return plan;
}

}  // namespace fatpack::core
