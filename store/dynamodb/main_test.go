package dynamodb_test

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// store.Open loads the AWS configuration the SDK's usual way; a local
	// server accepts any credentials, and the EC2 metadata service must not
	// be asked for some (it is not there, and waiting for it is slow).
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID":         "test",
		"AWS_SECRET_ACCESS_KEY":     "test",
		"AWS_EC2_METADATA_DISABLED": "true",
	} {
		if os.Getenv(k) == "" {
			os.Setenv(k, v)
		}
	}
	os.Exit(m.Run())
}
