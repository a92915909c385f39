package catalog

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	openapierrors "k8s.io/kube-openapi/pkg/validation/errors"
)

// A refusal is worded here from what kube-openapi's validator reports,
// never from the text it gives: that text quotes the refused string (a
// format's `must be of type email: "<value>"`), and data may be personal.
// Each kind of refusal is recognized by its code, and only the parts of
// its text that come from the schema are kept (a bound, a pattern, a type
// or format name), each checked against the shape the schema gives it;
// anything else is worded generically. The words are the API server's for
// the same refusal of a custom resource, without the value.

// notConforming is the refusal of what is not recognized.
const notConforming = "does not conform to the schema"

// violationOf words err, one error of kube-openapi's validation of
// {"data": …}.
func violationOf(err error) *Violation {
	if e, ok := err.(*openapierrors.Validation); ok {
		return validationViolation(e)
	}
	return plainViolation(err.Error())
}

// phrases are what kube-openapi's errors of each code say after
// "<path> in body ", each variable only where the schema's value stands
// (a bound, a pattern): such a text is kept when it has its phrase's
// shape. They are Invalid values, as the API server words them.
var phrases = func() map[int32]*regexp.Regexp {
	const number = `-?[0-9][0-9.]*(?:e[-+]?[0-9]+)?`
	m := map[int32]string{
		openapierrors.TooShortFailCode:      `should be at least [0-9]+ chars long`,
		openapierrors.PatternFailCode:       `(?s:should match '.*')`,
		openapierrors.MultipleOfFailCode:    `should be a multiple of ` + number,
		openapierrors.MaxFailCode:           `should be less than (?:or equal to )?` + number,
		openapierrors.MinFailCode:           `should be greater than (?:or equal to )?` + number,
		openapierrors.UniqueFailCode:        `shouldn't contain duplicates`,
		openapierrors.MinItemsFailCode:      `should have at least [0-9]+ items`,
		openapierrors.TooFewPropertiesCode:  `should have at least [0-9]+ properties`,
		openapierrors.NoAdditionalItemsCode: `can't have additional items`,
	}
	out := make(map[int32]*regexp.Regexp, len(m))
	for code, phrase := range m {
		out[code] = regexp.MustCompile(`^` + phrase + `$`)
	}
	return out
}()

// countedRefusals are the codes whose bound kube-openapi gives as a
// number (Validation.Valid), with how the API server words them.
var countedRefusals = map[int32]struct {
	typ    field.ErrorType
	format string
}{
	openapierrors.TooLongFailCode:       {field.ErrorTypeTooLong, "may not be more than %d bytes"},
	openapierrors.MaxItemsFailCode:      {field.ErrorTypeTooMany, "must have at most %d items"},
	openapierrors.TooManyPropertiesCode: {field.ErrorTypeTooMany, "must have at most %d properties"},
}

// typeName is a type or format name, or a list of types
// ("integer,string").
var typeName = regexp.MustCompile(`^[a-z][a-z0-9-]*(?:,[a-z][a-z0-9-]*)*$`)

// validationViolation words one of kube-openapi's field validation errors.
func validationViolation(e *openapierrors.Validation) *Violation {
	v := &Violation{Field: strings.TrimPrefix(e.Name, "."), Message: body(field.ErrorTypeInvalid, notConforming)}
	if v.Field == "" {
		v.Field = "data"
	}
	// The text after the path: "should match '^a'".
	prefix := e.Name + " "
	if e.In != "" {
		prefix = e.Name + " in " + e.In + " "
	}
	rest, _ := strings.CutPrefix(e.Error(), prefix)
	if phrase, ok := phrases[e.Code()]; ok {
		if phrase.MatchString(rest) {
			v.Message = body(field.ErrorTypeInvalid, rest)
		}
		return v
	}
	if c, ok := countedRefusals[e.Code()]; ok {
		n, _ := e.Valid.(int64)
		v.Message = body(c.typ, fmt.Sprintf(c.format, n))
		return v
	}
	switch e.Code() {
	case openapierrors.RequiredFailCode:
		v.Message = body(field.ErrorTypeRequired, "")
	case openapierrors.EnumFailCode:
		v.Message = body(field.ErrorTypeNotSupported, supportedValues(e.Values))
	case openapierrors.InvalidTypeCode:
		// "must be of type <type or format>", then for a format the
		// value, quoted: only the name is kept.
		if name, ok := strings.CutPrefix(rest, "must be of type "); ok {
			if name, _, _ = strings.Cut(name, ": "); typeName.MatchString(name) {
				v.Message = body(field.ErrorTypeTypeInvalid, "must be of type "+name)
			}
		}
	case openapierrors.UnallowedPropertyCode:
		// The property's name is where, not what: it is in the path.
		key, _ := e.Value.(string)
		v.Field += "." + key
		v.Message = body(field.ErrorTypeInvalid, "is a forbidden property")
	}
	return v
}

// Errors kube-openapi reports as text only, each naming its path.
var (
	// `"data.v" must validate at least one schema (anyOf)`, and the
	// like for oneOf, allOf and not.
	plainComposite = regexp.MustCompile(`^("(?:[^"\\]|\\.)*") (must validate at least one schema \(anyOf\)|must validate one and only one schema \(oneOf\)|must validate all the schemas \(allOf\)|must not validate the schema \(not\))`)
	// A number, or a bound of the schema, out of the range of the type's
	// format: "Checked value must be of type integer with format int32
	// in data.v" (the number checked), "Maximum boundary value must be of
	// type integer (default format) in data.v" (the schema's maximum).
	plainRange = regexp.MustCompile(`^(Checked|MultipleOf|Maximum boundary|Minimum boundary) value must be of type ([a-z]+)(?: with format ([a-z0-9]+)| \(default format\)) in (.+)$`)
)

// plainViolation words an error kube-openapi gives as text.
func plainViolation(text string) *Violation {
	if m := plainComposite.FindStringSubmatch(text); m != nil {
		if path, err := strconv.Unquote(m[1]); err == nil {
			return &Violation{Field: strings.TrimPrefix(path, "."), Message: body(field.ErrorTypeInvalid, m[2])}
		}
	}
	if m := plainRange.FindStringSubmatch(text); m != nil {
		what := "must be of type " + m[2]
		if m[3] != "" {
			what += " with format " + m[3]
		}
		if m[1] != "Checked" {
			// The schema's bound does not fit its own type: every value
			// is refused, as the API server refuses it.
			what = "the schema's " + strings.ToLower(strings.TrimSuffix(m[1], " boundary")) + " is not of type " + m[2]
			if m[3] != "" {
				what += " with format " + m[3]
			}
		}
		return &Violation{Field: m[4], Message: body(field.ErrorTypeInvalid, what)}
	}
	return &Violation{Field: "data", Message: body(field.ErrorTypeInvalid, notConforming)}
}

// body is a refusal's message as a Kubernetes field error words it
// ("Invalid value: should match '^a'"), with no value.
func body(t field.ErrorType, detail string) string {
	e := field.Error{Type: t, BadValue: field.OmitValueType{}, Detail: detail}
	return e.ErrorBody()
}

// supportedValues lists the values of an enum, as the API server does.
func supportedValues(values []any) string {
	if len(values) == 0 {
		return ""
	}
	quoted := make([]string, len(values))
	for i, v := range values {
		s, ok := v.(string)
		if !ok {
			b, _ := json.Marshal(v)
			s = string(b)
		}
		quoted[i] = strconv.Quote(s)
	}
	return "supported values: " + strings.Join(quoted, ", ")
}
