package decode

// parseRFC3339Millis parses the common RFC 3339 form
// YYYY-MM-DDTHH:MM:SS[.fraction]{Z|±HH:MM} into milliseconds since the Unix
// epoch (the fraction rounded down), without allocating. It reports false for
// anything outside that form, including valid but rarer spellings, which the
// caller then hands to time.Parse; whatever it accepts, time.Parse with
// time.RFC3339Nano accepts with the same instant.
func parseRFC3339Millis(b []byte) (int64, bool) {
	if len(b) < len("2006-01-02T15:04:05Z") ||
		b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return 0, false
	}
	year, ok1 := digits(b[0:4])
	month, ok2 := digits(b[5:7])
	day, ok3 := digits(b[8:10])
	hour, ok4 := digits(b[11:13])
	minute, ok5 := digits(b[14:16])
	sec, ok6 := digits(b[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) ||
		month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour > 23 || minute > 59 || sec > 59 {
		return 0, false
	}
	i := 19
	millis := int64(0)
	if i < len(b) && b[i] == '.' {
		i++
		start := i
		scale := int64(100)
		for i < len(b) && isDigit(b[i]) {
			millis += int64(b[i]-'0') * scale
			scale /= 10
			i++
		}
		if n := i - start; n == 0 || n > 9 {
			return 0, false
		}
	}
	if i >= len(b) {
		return 0, false
	}
	offsetSec := int64(0)
	switch b[i] {
	case 'Z':
		i++
	case '+', '-':
		if len(b)-i != len("+07:00") || b[i+3] != ':' {
			return 0, false
		}
		oh, ok1 := digits(b[i+1 : i+3])
		om, ok2 := digits(b[i+4 : i+6])
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return 0, false
		}
		offsetSec = int64(oh*3600 + om*60)
		if b[i] == '-' {
			offsetSec = -offsetSec
		}
		i += 6
	default:
		return 0, false
	}
	if i != len(b) {
		return 0, false
	}
	secs := daysFromCivil(year, month, day)*86400 + int64(hour*3600+minute*60+sec) - offsetSec
	return secs*1000 + millis, true
}

// digits parses b as an unsigned decimal of only digits.
func digits(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil returns the number of days from 1970-01-01 to the given
// proleptic Gregorian date (negative before), counting in 400-year eras of
// 146097 days with years starting in March so the leap day comes last.
func daysFromCivil(year, month, day int) int64 {
	y := int64(year)
	if month <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400                     // [0, 399]
	mp := (int64(month) + 9) % 12          // March = 0
	doy := (153*mp+2)/5 + int64(day) - 1   // [0, 365]
	doe := yoe*365 + yoe/4 - yoe/100 + doy // [0, 146096]
	return era*146097 + doe - 719468
}
