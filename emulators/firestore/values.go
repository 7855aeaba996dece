package firestore

import (
	"bytes"
	"math"
	"sort"
	"strings"

	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// Type ranks in Firestore's cross-type order: null < bool < number < timestamp
// < string < bytes < reference < geopoint < array < vector < map.
const (
	rankNull = iota
	rankBool
	rankNumber
	rankTimestamp
	rankString
	rankBytes
	rankReference
	rankGeoPoint
	rankArray
	rankVector
	rankMap
)

// maxDepth is Firestore's limit on the nesting of maps and arrays.
const maxDepth = 20

func typeRank(v *pb.Value) int {
	switch x := v.GetValueType().(type) {
	case *pb.Value_NullValue:
		return rankNull
	case *pb.Value_BooleanValue:
		return rankBool
	case *pb.Value_IntegerValue, *pb.Value_DoubleValue:
		return rankNumber
	case *pb.Value_TimestampValue:
		return rankTimestamp
	case *pb.Value_StringValue:
		return rankString
	case *pb.Value_BytesValue:
		return rankBytes
	case *pb.Value_ReferenceValue:
		return rankReference
	case *pb.Value_GeoPointValue:
		return rankGeoPoint
	case *pb.Value_ArrayValue:
		return rankArray
	case *pb.Value_MapValue:
		if isVector(x.MapValue) {
			return rankVector
		}
		return rankMap
	}
	return rankNull
}

// isVector reports whether m is the map encoding of a vector embedding.
func isVector(m *pb.MapValue) bool {
	t, ok := m.GetFields()["__type__"]
	return ok && t.GetStringValue() == "__vector__"
}

func isNaN(v *pb.Value) bool {
	d, ok := v.GetValueType().(*pb.Value_DoubleValue)
	return ok && math.IsNaN(d.DoubleValue)
}

func isNull(v *pb.Value) bool {
	_, ok := v.GetValueType().(*pb.Value_NullValue)
	return ok
}

func isNumber(v *pb.Value) bool { return typeRank(v) == rankNumber }

// compareValues orders two values as Firestore does across and within types.
func compareValues(a, b *pb.Value) int {
	ra, rb := typeRank(a), typeRank(b)
	if ra != rb {
		return cmpInt(ra, rb)
	}
	switch ra {
	case rankNull:
		return 0
	case rankBool:
		return cmpBool(a.GetBooleanValue(), b.GetBooleanValue())
	case rankNumber:
		return compareNumbers(a, b)
	case rankTimestamp:
		ta, tb := a.GetTimestampValue(), b.GetTimestampValue()
		if c := cmpInt64(ta.GetSeconds(), tb.GetSeconds()); c != 0 {
			return c
		}
		return cmpInt64(int64(ta.GetNanos()), int64(tb.GetNanos()))
	case rankString:
		return strings.Compare(a.GetStringValue(), b.GetStringValue())
	case rankBytes:
		return bytes.Compare(a.GetBytesValue(), b.GetBytesValue())
	case rankReference:
		return compareNames(a.GetReferenceValue(), b.GetReferenceValue())
	case rankGeoPoint:
		ga, gb := a.GetGeoPointValue(), b.GetGeoPointValue()
		if c := cmpFloat(ga.GetLatitude(), gb.GetLatitude()); c != 0 {
			return c
		}
		return cmpFloat(ga.GetLongitude(), gb.GetLongitude())
	case rankArray:
		return compareArrays(a.GetArrayValue().GetValues(), b.GetArrayValue().GetValues())
	case rankVector:
		va := a.GetMapValue().GetFields()["value"].GetArrayValue().GetValues()
		vb := b.GetMapValue().GetFields()["value"].GetArrayValue().GetValues()
		if c := cmpInt(len(va), len(vb)); c != 0 {
			return c
		}
		return compareArrays(va, vb)
	case rankMap:
		return compareMaps(a.GetMapValue().GetFields(), b.GetMapValue().GetFields())
	}
	return 0
}

func compareArrays(a, b []*pb.Value) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := compareValues(a[i], b[i]); c != 0 {
			return c
		}
	}
	return cmpInt(len(a), len(b))
}

func compareMaps(a, b map[string]*pb.Value) int {
	ka, kb := sortedKeys(a), sortedKeys(b)
	for i := 0; i < len(ka) && i < len(kb); i++ {
		if c := strings.Compare(ka[i], kb[i]); c != 0 {
			return c
		}
		if c := compareValues(a[ka[i]], b[kb[i]]); c != 0 {
			return c
		}
	}
	return cmpInt(len(ka), len(kb))
}

func sortedKeys(m map[string]*pb.Value) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// compareNumbers orders NaN before every other number and compares integers
// and doubles by their numeric value without losing int64 precision.
func compareNumbers(a, b *pb.Value) int {
	ai, aIsInt := a.GetValueType().(*pb.Value_IntegerValue)
	bi, bIsInt := b.GetValueType().(*pb.Value_IntegerValue)
	switch {
	case aIsInt && bIsInt:
		return cmpInt64(ai.IntegerValue, bi.IntegerValue)
	case aIsInt:
		return -compareDoubleInt(b.GetDoubleValue(), ai.IntegerValue)
	case bIsInt:
		return compareDoubleInt(a.GetDoubleValue(), bi.IntegerValue)
	}
	da, db := a.GetDoubleValue(), b.GetDoubleValue()
	switch {
	case math.IsNaN(da) && math.IsNaN(db):
		return 0
	case math.IsNaN(da):
		return -1
	case math.IsNaN(db):
		return 1
	}
	return cmpFloat(da, db)
}

func compareDoubleInt(d float64, i int64) int {
	if math.IsNaN(d) {
		return -1
	}
	if d < -9.223372036854775808e18 {
		return -1
	}
	if d >= 9.223372036854775808e18 {
		return 1
	}
	t := math.Trunc(d)
	if c := cmpInt64(int64(t), i); c != 0 {
		return c
	}
	return cmpFloat(d-t, 0)
}

// valuesEqual is Firestore's equality: numbers compare numerically (1 == 1.0),
// NaN equals NaN, and -0.0 equals 0.0.
func valuesEqual(a, b *pb.Value) bool { return compareValues(a, b) == 0 }

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// compareNames orders resource names segment by segment, which is how
// Firestore orders documents by __name__.
func compareNames(a, b string) int {
	sa, sb := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < len(sa) && i < len(sb); i++ {
		if c := compareIDs(sa[i], sb[i]); c != 0 {
			return c
		}
	}
	return cmpInt(len(sa), len(sb))
}

// validateValue rejects values Firestore refuses to store: unset values,
// arrays directly inside arrays, reserved or empty map keys, nesting deeper
// than maxDepth, and references to documents of another database.
func validateValue(v *pb.Value, db string, depth int, inArray bool) error {
	if depth > maxDepth {
		return status.Errorf(codes.InvalidArgument, "value nested deeper than %d levels", maxDepth)
	}
	switch x := v.GetValueType().(type) {
	case nil:
		return status.Errorf(codes.InvalidArgument, "value has no value type set")
	case *pb.Value_NullValue:
		if x.NullValue != structpb.NullValue_NULL_VALUE {
			return status.Errorf(codes.InvalidArgument, "invalid null value %d", x.NullValue)
		}
	case *pb.Value_TimestampValue:
		t := x.TimestampValue
		if t == nil || t.CheckValid() != nil {
			return status.Errorf(codes.InvalidArgument, "invalid timestamp value %v", t)
		}
	case *pb.Value_StringValue:
		if len(x.StringValue) > 1<<20 {
			return status.Errorf(codes.InvalidArgument, "string value longer than 1 MiB")
		}
	case *pb.Value_ReferenceValue:
		n, err := parseDocName(x.ReferenceValue)
		if err != nil {
			return status.Errorf(codes.InvalidArgument, "invalid reference value %q", x.ReferenceValue)
		}
		if db != "" && n.db != db {
			return status.Errorf(codes.InvalidArgument, "reference %q belongs to another database than %q", x.ReferenceValue, db)
		}
	case *pb.Value_GeoPointValue:
		g := x.GeoPointValue
		if g == nil || g.Latitude < -90 || g.Latitude > 90 || g.Longitude < -180 || g.Longitude > 180 {
			return status.Errorf(codes.InvalidArgument, "invalid geo point %v", g)
		}
	case *pb.Value_ArrayValue:
		if inArray {
			return status.Errorf(codes.InvalidArgument, "an array cannot directly contain another array")
		}
		for _, e := range x.ArrayValue.GetValues() {
			if err := validateValue(e, db, depth+1, true); err != nil {
				return err
			}
		}
	case *pb.Value_MapValue:
		return validateFields(x.MapValue.GetFields(), db, depth+1)
	}
	return nil
}

func validateFields(fields map[string]*pb.Value, db string, depth int) error {
	for k, e := range fields {
		if k == "" {
			return status.Errorf(codes.InvalidArgument, "field names must not be empty")
		}
		if isReserved(k) && !(depth > 1 && k == "__type__") {
			return status.Errorf(codes.InvalidArgument, "field name %q is reserved", k)
		}
		if len(k) > 1500 {
			return status.Errorf(codes.InvalidArgument, "field name longer than 1500 bytes")
		}
		if err := validateValue(e, db, depth, false); err != nil {
			return err
		}
	}
	return nil
}

// isReserved reports whether an ID or field name matches __.*__, which
// Firestore keeps for itself.
func isReserved(s string) bool {
	return len(s) >= 4 && strings.HasPrefix(s, "__") && strings.HasSuffix(s, "__")
}

// nameSize is Firestore's storage size of a document name: each segment's
// length plus one, plus 16.
func nameSize(path string) int {
	n := 16
	for _, s := range strings.Split(path, "/") {
		n += len(s) + 1
	}
	return n
}

// valueSize is Firestore's storage size of a value.
func valueSize(v *pb.Value) int {
	switch x := v.GetValueType().(type) {
	case *pb.Value_NullValue, *pb.Value_BooleanValue:
		return 1
	case *pb.Value_IntegerValue, *pb.Value_DoubleValue, *pb.Value_TimestampValue:
		return 8
	case *pb.Value_StringValue:
		return len(x.StringValue) + 1
	case *pb.Value_BytesValue:
		return len(x.BytesValue)
	case *pb.Value_ReferenceValue:
		if n, err := parseDocName(x.ReferenceValue); err == nil {
			return nameSize(n.path)
		}
		return len(x.ReferenceValue) + 1
	case *pb.Value_GeoPointValue:
		return 16
	case *pb.Value_ArrayValue:
		n := 0
		for _, e := range x.ArrayValue.GetValues() {
			n += valueSize(e)
		}
		return n
	case *pb.Value_MapValue:
		return fieldsSize(x.MapValue.GetFields())
	}
	return 0
}

func fieldsSize(fields map[string]*pb.Value) int {
	n := 0
	for k, v := range fields {
		n += len(k) + 1 + valueSize(v)
	}
	return n
}

// maxDocSize is Firestore's limit on the storage size of one document.
const maxDocSize = 1 << 20

// docSize is Firestore's storage size of a document: its name, its fields and
// 32 bytes of overhead.
func docSize(path string, fields map[string]*pb.Value) int {
	return nameSize(path) + fieldsSize(fields) + 32
}
