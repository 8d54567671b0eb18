/* SPDX-License-Identifier: Apache-2.0 */
/* The cxlt_config_* functions from C11, linked against the shared library only: create, set,
 * validate, load a file, the dump's buffer-size protocol, destroy. */
#include <cxltier/cxltier.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

int main(void) {
  cxlt_config_t *cfg = NULL;
  size_t needed = 0, again = 0;
  char *buf;
  char path[] = "/tmp/cxlt-config-c-XXXXXX";
  const char *root = getenv("CXLT_SOURCE_ROOT");
  int fd;
  FILE *f;

  CHECK(cxlt_config_create(&cfg) == CXLT_OK);
  CHECK(cfg != NULL);
  CHECK(cxlt_config_validate(cfg) == CXLT_OK);

  /* Keys by their TOML names, values as text. */
  CHECK(cxlt_config_set(cfg, "policy.alpha", "0.125") == CXLT_OK);
  CHECK(cxlt_config_set(cfg, "tiers.0.kind", "hbm") == CXLT_OK);
  CHECK(cxlt_config_set(cfg, "tiers.0.budget", "256MiB") == CXLT_OK);
  CHECK(cxlt_config_set(cfg, "tiers.1.kind", "cxl") == CXLT_OK);
  CHECK(cxlt_config_set(cfg, "tiers.1.budget", "1073741824") == CXLT_OK);
  CHECK(cxlt_config_validate(cfg) == CXLT_OK);

  /* Errors name the key. */
  CHECK(cxlt_config_set(cfg, "policy.alpah", "0.1") == CXLT_ERROR_CONFIG);
  CHECK(strstr(cxlt_last_error(), "policy.alpha") != NULL);
  CHECK(cxlt_config_set(cfg, "policy.beta", "-1") == CXLT_ERROR_CONFIG);
  CHECK(strstr(cxlt_last_error(), "policy.beta") != NULL);
  CHECK(cxlt_config_set(cfg, "tiers.1.budget", "1MiB") == CXLT_OK);
  CHECK(cxlt_config_validate(cfg) == CXLT_ERROR_CONFIG);
  CHECK(strstr(cxlt_last_error(), "tiers.1.budget = 1MiB is smaller than one block") != NULL);
  CHECK(cxlt_config_set(cfg, "tiers.1.budget", "1GiB") == CXLT_OK);
  CHECK(cxlt_config_set(NULL, "policy.alpha", "0.1") == CXLT_ERROR_INVALID_ARGUMENT);

  /* Dump: ask for the size, refuse a short buffer, fill an exact one. */
  CHECK(cxlt_config_dump(cfg, NULL, 0, &needed) == CXLT_ERROR_INVALID_ARGUMENT);
  CHECK(needed > 1);
  buf = malloc(needed);
  CHECK(buf != NULL);
  if (buf != NULL) {
    memset(buf, 'x', needed);
    CHECK(cxlt_config_dump(cfg, buf, needed - 1, &again) == CXLT_ERROR_INVALID_ARGUMENT);
    CHECK(again == needed);
    CHECK(buf[0] == 'x');
    CHECK(cxlt_config_dump(cfg, buf, needed, &again) == CXLT_OK);
    CHECK(buf[needed - 1] == '\0');
    CHECK(strlen(buf) + 1 == needed);
    CHECK(strstr(buf, "alpha = 0.125") != NULL);
    CHECK(strstr(buf, "budget = \"1GiB\"") != NULL);
    free(buf);
  }

  /* Load a file written here: it merges under the keys set above (API calls win). */
  fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd >= 0) {
    f = fdopen(fd, "w");
    fputs("[policy]\nalpha = 0.5\nbeta = 0.25\n[runtime]\nmigration_threads = 4\n", f);
    fclose(f);
    CHECK(cxlt_config_load_file(cfg, path) == CXLT_OK);
    CHECK(cxlt_config_dump(cfg, NULL, 0, &needed) == CXLT_ERROR_INVALID_ARGUMENT);
    buf = malloc(needed);
    if (buf != NULL) {
      CHECK(cxlt_config_dump(cfg, buf, needed, NULL) == CXLT_OK);
      CHECK(strstr(buf, "alpha = 0.125") != NULL); /* set() outranks the file */
      CHECK(strstr(buf, "beta = 0.25") != NULL);
      CHECK(strstr(buf, "migration_threads = 4") != NULL);
      free(buf);
    }
    f = fopen(path, "w");
    if (f != NULL) {
      fputs("[runtime]\nmigration_threads = 100\n", f);
      fclose(f);
    }
    CHECK(cxlt_config_load_file(cfg, path) == CXLT_ERROR_CONFIG);
    CHECK(strstr(cxlt_last_error(), ":2:21: runtime.migration_threads = 100") != NULL);
    unlink(path);
  }
  CHECK(cxlt_config_load_file(cfg, "/nonexistent/cxlt.toml") == CXLT_ERROR_IO);
  cxlt_config_destroy(cfg);

  /* The shipped example. */
  if (root != NULL) {
    char example[4096];
    snprintf(example, sizeof example, "%s/examples/three-tier.toml", root);
    CHECK(cxlt_config_create(&cfg) == CXLT_OK);
    CHECK(cxlt_config_load_file(cfg, example) == CXLT_OK);
    CHECK(cxlt_config_validate(cfg) == CXLT_OK);
    cxlt_config_destroy(cfg);
  }
  cxlt_config_destroy(NULL);

  if (failures == 0) printf("C config test: ok\n");
  return failures == 0 ? 0 : 1;
}
