package testservers

import (
	"context"
	"path/filepath"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/walkeeper/walkeeper/internal/testkit/testbin"
)

// Azurite's well-known development account (the same in every Azurite and in Microsoft's
// documentation; it grants nothing outside the emulator).
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// startAzurite runs Azurite's blob service. gocloud's azureblob reaches it with
// protocol=http and domain=127.0.0.1:PORT in the URL: a domain starting with 127.0.0.1 makes
// it address the account by path (http://127.0.0.1:PORT/devstoreaccount1/CONTAINER), as the
// emulator expects; the shared key comes from AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY.
func startAzurite(s *Server) error {
	addr, err := s.run(1, nil, func(ports []int, data string) []string {
		return []string{"--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(ports[0]),
			"--location", data, "--debug", filepath.Join(s.dir, "debug.log"),
			"--skipApiVersionCheck", "--disableTelemetry"}
	})
	if err != nil {
		return err
	}
	s.Env = []string{"AZURE_STORAGE_ACCOUNT=" + AzuriteAccount, "AZURE_STORAGE_KEY=" + AzuriteKey}
	cred, err := azblob.NewSharedKeyCredential(AzuriteAccount, AzuriteKey)
	if err != nil {
		return err
	}
	accountURL := s.Endpoint + "/" + AzuriteAccount
	s.newBucket = func(ctx context.Context, name string) (string, error) {
		c, err := container.NewClientWithSharedKeyCredential(accountURL+"/"+name, cred, nil)
		if err != nil {
			return "", err
		}
		if _, err := c.Create(ctx, nil); err != nil {
			return "", err
		}
		return "azblob://" + name + "?protocol=http&domain=" + addr, nil
	}
	// Azurite is a Node program that loads tens of thousands of module files before it listens: with
	// a cold page cache on a disk CI keeps busy it took over a minute once. The wait ends at
	// once if the process exits, so a long one costs nothing when Azurite is healthy.
	return testbin.WaitTCP(s.p, addr, 3*time.Minute)
}
