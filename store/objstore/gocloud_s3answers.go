package objstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"
)

// The SDK reads an S3 error answer whole and believes any 200 to a listing: the bucket's S3
// client bounds every error answer (s3Opener), and gocloud's BeforeList hook bounds and checks
// each list page (docs/STORAGE.md §4), whose body maxS3ListAnswer bounds: 1,000 entries (the
// page size asked) of 1,024-byte keys, every byte escaped as the 6-byte `&quot;`, is about
// 6.5 MB, and a page of walkeeper's own keys well under 1 MB.
const maxS3ListAnswer = 8 << 20

// s3Opener is s3blob's URL opener with its bucket reopened on a copy of its S3 client whose
// HTTP client refuses an error answer's body past maxErrorAnswer, since gocloud gives a
// per-request hook to lists and gets only. The reopen keeps the options the URL set (the
// client's, ssetype, kmskeyid, the checksum setting) and sits under the mux, which applies
// prefix= and key=: reopened above it, a prefixed root would read and write the bucket's top.
type s3Opener struct{}

func (s3Opener) OpenBucketURL(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	bkt, err := new(s3blob.URLOpener).OpenBucketURL(ctx, u)
	if err != nil {
		return nil, err
	}
	defer bkt.Close()
	var client *s3.Client
	if !bkt.As(&client) {
		return nil, errors.New("gocloud's s3 driver holds no AWS SDK v2 client")
	}
	bounded := s3.New(client.Options(), func(o *s3.Options) {
		o.HTTPClient = boundedAnswers{next: o.HTTPClient, okLimit: -1}
	})
	q := u.Query()
	opts := &s3blob.Options{
		KMSEncryptionID:            q.Get("kmskeyid"),
		RequestChecksumCalculation: client.Options().RequestChecksumCalculation,
	}
	for _, sse := range types.ServerSideEncryption("").Values() {
		if strings.EqualFold(string(sse), q.Get("ssetype")) { // as the opener, which checked it
			opts.EncryptionType = sse
		}
	}
	return s3blob.OpenBucket(ctx, bounded, u.Host, opts)
}

// guardS3Listing, run by a listing's BeforeList, bounds the body of the S3 page it requests
// and checks the page (checkS3ListPage); its empty pages in a row are bounded as every
// gocloud listing's (emptyPages).
func guardS3Listing(as func(any) bool) {
	var optFns *[]func(*s3.Options)
	if as(&optFns) {
		*optFns = append(*optFns, checkS3ListPages)
	}
}

func checkS3ListPages(o *s3.Options) {
	o.HTTPClient = boundedAnswers{next: o.HTTPClient, okLimit: maxS3ListAnswer}
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("walkeeperCheckListPage",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (
				middleware.InitializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleInitialize(ctx, in)
				if page, ok := out.Result.(*s3.ListObjectsV2Output); ok && err == nil {
					err = checkS3ListPage(page)
				}
				return out, md, err
			}), middleware.Before)
	})
}

// checkS3ListPage fails a page that is not a listing (S3 always says whether it is truncated; a 200
// holding an <Error> document or nothing decodes as an empty page), a truncated page without
// the token that continues it, which gocloud reads as the end.
func checkS3ListPage(page *s3.ListObjectsV2Output) error {
	if page.IsTruncated == nil {
		return fmt.Errorf("%w: the answer is not a ListBucketResult (no IsTruncated)", errBadListing)
	}
	if *page.IsTruncated && aws.ToString(page.NextContinuationToken) == "" {
		return fmt.Errorf("%w: truncated without a NextContinuationToken", errBadListing)
	}
	return nil
}

// boundedAnswers is an S3 HTTP client whose answers' bodies fail with answerTooLarge past
// their limit: maxErrorAnswer for an error, okLimit (< 0: none) for a success.
type boundedAnswers struct {
	next    s3.HTTPClient
	okLimit int64
}

func (c boundedAnswers) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.next.Do(req)
	if err != nil {
		return resp, err
	}
	limit, what := c.okLimit, "answer"
	if isErrorAnswer(resp) {
		limit, what = maxErrorAnswer, "error answer"
	}
	if limit >= 0 {
		resp.Body = newBoundedBody(resp.Body, limit, what)
	}
	return resp, nil
}
