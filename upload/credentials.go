package upload

import (
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// credentialsOf returns o's static keys when o.AccessKey is set, or else
// minio-go's standard chain, which takes the first source that has keys:
//
//  1. AWS_ACCESS_KEY_ID (or AWS_ACCESS_KEY), AWS_SECRET_ACCESS_KEY (or
//     AWS_SECRET_KEY) and AWS_SESSION_TOKEN;
//  2. MINIO_ROOT_USER/MINIO_ROOT_PASSWORD (or MINIO_ACCESS_KEY/
//     MINIO_SECRET_KEY);
//  3. the AWS shared credentials file (AWS_SHARED_CREDENTIALS_FILE or
//     ~/.aws/credentials, profile AWS_PROFILE or "default");
//  4. the MinIO client's config (MINIO_SHARED_CREDENTIALS_FILE or
//     ~/.mc/config.json, alias MINIO_ALIAS or "s3");
//  5. IAM: a web identity token (AWS_WEB_IDENTITY_TOKEN_FILE and
//     AWS_ROLE_ARN), the ECS task role, or the EC2 instance role through
//     IMDSv2; these credentials expire and are fetched again before.
//
// With nothing found requests go unsigned (anonymous).
func credentialsOf(o Options) *credentials.Credentials {
	if o.AccessKey != "" {
		return credentials.NewStaticV4(o.AccessKey, o.SecretKey, o.SessionToken)
	}
	return credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{},
		&credentials.EnvMinio{},
		&credentials.FileAWSCredentials{},
		&credentials.FileMinioClient{},
		&credentials.IAM{},
	})
}
