package source

import (
	"log"
	"os"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// init routes paho's debug log to stderr when PAHODEBUG is set, for
// diagnosing a failing broker test.
func init() {
	if os.Getenv("PAHODEBUG") != "" {
		paho.DEBUG = log.New(os.Stderr, "PAHO ", log.Lmicroseconds)
	}
}
