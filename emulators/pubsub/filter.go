package pubsub

import (
	"strconv"
	"strings"
	"unicode"

	"google.golang.org/grpc/codes"
)

// filter is a subscription's filter on attributes, in Pub/Sub's syntax
// (cloud.google.com/pubsub/docs/subscription-message-filter):
//
//	attributes:key                 the attribute is present
//	attributes.key = "value"       equal (!= for not equal)
//	hasPrefix(attributes.key, "v") starts with
//	NOT x (or -x), x AND y, x OR y, (x)
//
// AND and OR are not mixed without parentheses, as Pub/Sub requires. A
// nil filter matches every message.
type filter struct {
	op       string // "and", "or", "not", "has", "eq", "ne", "prefix"
	args     []*filter
	key, val string
}

// maxFilterBytes is Pub/Sub's limit on a filter's length.
const maxFilterBytes = 256

func (f *filter) match(attrs map[string]string) bool {
	if f == nil {
		return true
	}
	v, ok := attrs[f.key]
	switch f.op {
	case "and":
		for _, a := range f.args {
			if !a.match(attrs) {
				return false
			}
		}
		return true
	case "or":
		for _, a := range f.args {
			if a.match(attrs) {
				return true
			}
		}
		return false
	case "not":
		return !f.args[0].match(attrs)
	case "has":
		return ok
	case "eq":
		return ok && v == f.val
	case "ne":
		return !ok || v != f.val
	case "prefix":
		return ok && strings.HasPrefix(v, f.val)
	}
	return false
}

// parseFilter parses a subscription's filter; "" is no filter.
func parseFilter(src string) (*filter, error) {
	if strings.TrimSpace(src) == "" {
		return nil, nil
	}
	if len(src) > maxFilterBytes {
		return nil, errorf(codes.InvalidArgument, "Invalid filter: it is %d bytes long; the maximum is %d.", len(src), maxFilterBytes)
	}
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	f, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.i < len(p.toks) {
		return nil, p.fail("unexpected %q", p.toks[p.i].text)
	}
	return f, nil
}

type token struct {
	text string
	str  bool // a quoted string, text unquoted
}

func lex(src string) ([]token, error) {
	var out []token
	for i := 0; i < len(src); {
		c := rune(src[i])
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '"':
			j := i + 1
			for j < len(src) && src[j] != '"' {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(src) {
				return nil, errorf(codes.InvalidArgument, "Invalid filter: unterminated string.")
			}
			s, err := strconv.Unquote(src[i : j+1])
			if err != nil {
				return nil, errorf(codes.InvalidArgument, "Invalid filter: bad string %s.", src[i:j+1])
			}
			out = append(out, token{text: s, str: true})
			i = j + 1
		case c == '!' && i+1 < len(src) && src[i+1] == '=':
			out = append(out, token{text: "!="})
			i += 2
		case strings.ContainsRune("()=:.,-", c):
			out = append(out, token{text: string(c)})
			i++
		case c == '_' || unicode.IsLetter(c) || unicode.IsDigit(c):
			j := i
			for j < len(src) && (src[j] == '_' || src[j] == '-' || unicode.IsLetter(rune(src[j])) || unicode.IsDigit(rune(src[j]))) {
				j++
			}
			out = append(out, token{text: src[i:j]})
			i = j
		default:
			return nil, errorf(codes.InvalidArgument, "Invalid filter: unexpected character %q.", c)
		}
	}
	return out, nil
}

type parser struct {
	toks []token
	i    int
}

func (p *parser) fail(format string, args ...any) error {
	return errorf(codes.InvalidArgument, "Invalid filter: "+format+".", args...)
}

func (p *parser) peek() (token, bool) {
	if p.i < len(p.toks) {
		return p.toks[p.i], true
	}
	return token{}, false
}

// accept consumes the next token if it is the keyword or symbol text.
func (p *parser) accept(text string) bool {
	if t, ok := p.peek(); ok && !t.str && t.text == text {
		p.i++
		return true
	}
	return false
}

func (p *parser) expect(text string) error {
	if !p.accept(text) {
		return p.fail("expected %q", text)
	}
	return nil
}

// expr is terms joined by one of AND and OR.
func (p *parser) expr() (*filter, error) {
	first, err := p.term()
	if err != nil {
		return nil, err
	}
	f := &filter{args: []*filter{first}}
	for {
		var op string
		switch {
		case p.accept("AND"):
			op = "and"
		case p.accept("OR"):
			op = "or"
		default:
			if len(f.args) == 1 {
				return first, nil
			}
			return f, nil
		}
		if f.op != "" && f.op != op {
			return nil, p.fail("AND and OR must not be mixed without parentheses")
		}
		f.op = op
		next, err := p.term()
		if err != nil {
			return nil, err
		}
		f.args = append(f.args, next)
	}
}

func (p *parser) term() (*filter, error) {
	if p.accept("NOT") || p.accept("-") {
		f, err := p.term()
		if err != nil {
			return nil, err
		}
		return &filter{op: "not", args: []*filter{f}}, nil
	}
	if p.accept("(") {
		f, err := p.expr()
		if err != nil {
			return nil, err
		}
		return f, p.expect(")")
	}
	if p.accept("hasPrefix") {
		if err := p.expect("("); err != nil {
			return nil, err
		}
		if err := p.expect("attributes"); err != nil {
			return nil, err
		}
		if err := p.expect("."); err != nil {
			return nil, err
		}
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		if err := p.expect(","); err != nil {
			return nil, err
		}
		val, err := p.str()
		if err != nil {
			return nil, err
		}
		return &filter{op: "prefix", key: key, val: val}, p.expect(")")
	}
	if err := p.expect("attributes"); err != nil {
		return nil, err
	}
	if p.accept(":") {
		key, err := p.key()
		return &filter{op: "has", key: key}, err
	}
	if err := p.expect("."); err != nil {
		return nil, err
	}
	key, err := p.key()
	if err != nil {
		return nil, err
	}
	op := "eq"
	if p.accept("!=") {
		op = "ne"
	} else if err := p.expect("="); err != nil {
		return nil, err
	}
	val, err := p.str()
	return &filter{op: op, key: key, val: val}, err
}

// key is an attribute key, bare or quoted.
func (p *parser) key() (string, error) {
	t, ok := p.peek()
	if !ok || (!t.str && !isIdent(t.text)) {
		return "", p.fail("expected an attribute key")
	}
	p.i++
	return t.text, nil
}

func (p *parser) str() (string, error) {
	t, ok := p.peek()
	if !ok || !t.str {
		return "", p.fail("expected a quoted string")
	}
	p.i++
	return t.text, nil
}

func isIdent(s string) bool {
	return s != "" && s != "AND" && s != "OR" && s != "NOT" && !strings.ContainsAny(s[:1], "-")
}
