package web

import (
	"encoding/json"
	"reflect"
	"strconv"
	"time"

	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/static"
	"github.com/waitroom/waitroom/stream"
)

// A queue's settings in the admin API, read from queue.SettingsTable: the body of PUT
// /admin/api/queues/{queue} takes exactly the table's keys, and every answer that shows a
// queue's settings (that PUT's, the stats, the audit log's snapshots) writes each of them.

// settingRows is the queue settings table, read once.
var settingRows = queue.SettingsTable()

// queueBodyType is the body of PUT /admin/api/queues/{queue}: one field per setting, in the
// table's order, typed as its JSON value (json.RawMessage where null means "clear" or a
// value of the wrong type must be a 422 naming the field), so decodeStrict checks its keys.
var queueBodyType = func() reflect.Type {
	rows := settingRows
	fields := make([]reflect.StructField, 0, len(rows))
	for _, row := range rows {
		fields = append(fields, reflect.StructField{Name: row.Go, Type: bodyFieldType(row.Kind),
			Tag: reflect.StructTag(`json:"` + row.JSON + `"`)})
	}
	return reflect.StructOf(fields)
}()

func bodyFieldType(k queue.SettingKind) reflect.Type {
	switch k {
	case queue.KindFloat:
		return reflect.TypeFor[*float64]()
	case queue.KindInt, queue.KindDuration:
		return reflect.TypeFor[*int64]()
	case queue.KindBool:
		return reflect.TypeFor[*bool]()
	case queue.KindChoice:
		return reflect.TypeFor[*string]()
	case queue.KindList:
		return reflect.TypeFor[*[]string]()
	}
	return reflect.TypeFor[json.RawMessage]() // KindText, KindTime, KindObject
}

// newQueueBody is a pointer to an empty queue settings body.
func newQueueBody() any { return reflect.New(queueBodyType).Interface() }

// parseQueueBody reads a partial queue settings body strictly (decodeStrict: exactly the
// table's keys) into a patch; the queue validates the values' ranges. Durations outside what
// an int32 of their unit holds are refused here, with the setting's own message.
func parseQueueBody(body []byte) (p queue.SettingsPatch, err error) {
	b := newQueueBody()
	if err := decodeStrict(body, b); err != nil {
		return queue.SettingsPatch{}, err
	}
	v := reflect.ValueOf(b).Elem()
	for i, row := range settingRows {
		f := v.Field(i)
		if f.IsNil() {
			continue
		}
		switch row.Kind {
		case queue.KindDuration:
			n := f.Elem().Int()
			if n < 0 || n > 1<<31 {
				return p, &Error{Status: 422, Code: "invalid_settings", Field: row.JSON, Message: row.Refusal}
			}
			row.SetPatch(&p, time.Duration(n)*row.Unit)
		case queue.KindTime:
			t, err := parseTimeField(row.JSON, f.Interface().(json.RawMessage))
			if err != nil {
				return p, err
			}
			row.SetPatch(&p, *t)
		case queue.KindText:
			s, err := parseText(row.JSON, f.Interface().(json.RawMessage))
			if err != nil {
				return p, err
			}
			row.SetPatch(&p, s)
		case queue.KindObject:
			s, err := parseMessages(row.JSON, f.Interface().(json.RawMessage))
			if err != nil {
				return p, err
			}
			row.SetPatch(&p, s)
		default:
			row.SetPatch(&p, f.Elem().Interface())
		}
	}
	if err := checkBrandColor(p.BrandColor); err != nil {
		return p, err
	}
	return p, nil
}

// parseText reads a text setting: null and "" both clear it; anything but a string is a 422
// naming the field.
func parseText(field string, raw json.RawMessage) (string, error) {
	v := ""
	if string(raw) != "null" {
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", &Error{Status: 422, Code: "invalid_settings", Field: field, Message: field + " must be a string or null."}
		}
	}
	return v, nil
}

// parseMessages reads the messages setting: null and {} clear it; otherwise an object of
// objects of strings, stored as compact JSON (json.Marshal: keys sorted).
func parseMessages(field string, raw json.RawMessage) (string, error) {
	var o map[string]map[string]string
	if err := json.Unmarshal(raw, &o); err != nil {
		return "", &Error{Status: 422, Code: "invalid_settings", Field: field,
			Message: field + ` must be an object {"<language>": {"<key>": "text"}} or null.`}
	}
	if len(o) == 0 {
		return "", nil
	}
	b, err := json.Marshal(o)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// appendSettings writes every setting of st as members of a JSON object ("key":value,…),
// in the table's order.
func appendSettings(b []byte, st queue.Settings) []byte {
	for i, row := range settingRows {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, row.JSON)
		b = append(b, ':')
		v, err := json.Marshal(row.JSONValue(st, stream.TimeFormat))
		if err != nil {
			v = []byte("null")
		}
		b = append(b, v...)
	}
	return b
}

// withSettings is a JSON object of a queue's name, its settings and rest's members (rest
// marshals to an object).
func withSettings(name string, st queue.Settings, rest any) ([]byte, error) {
	r, err := json.Marshal(rest)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 1024+len(r))
	b = append(b, `{"name":`...)
	b = strconv.AppendQuote(b, name)
	b = append(b, ',')
	b = appendSettings(b, st)
	if len(r) > 2 {
		b = append(b, ',')
		b = append(b, r[1:]...)
	} else {
		b = append(b, '}')
	}
	return b, nil
}

// SettingsForm is the dashboard's queue settings form in the language of t: one field per
// row of the queue settings table that the form edits.
func SettingsForm(t map[string]string) []static.SettingField {
	rows := queue.SettingsForm()
	out := make([]static.SettingField, 0, len(rows))
	num := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	for _, row := range rows {
		f := static.SettingField{Name: row.JSON, LabelKey: row.Label, Label: t[row.Label], Step: row.Step, TestID: row.TestID,
			Wide: row.Wide, AutoOnly: row.AutoOnly}
		if row.Hint != "" {
			f.Hint = t[row.Hint]
		}
		switch row.Kind {
		case queue.KindBool:
			f.Input = "checkbox"
		case queue.KindChoice:
			f.Input = "select"
			for _, c := range row.Choices {
				f.Options = append(f.Options, static.SettingOption{Value: c, LabelKey: row.ChoiceLabel + c, Label: t[row.ChoiceLabel+c]})
			}
		case queue.KindList:
			f.Input = "list"
		default:
			f.Input = "number"
			f.Min, f.Max = num(row.Min), num(row.Max)
		}
		out = append(out, f)
	}
	return out
}
