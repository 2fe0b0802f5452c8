/* version.h - gpuheal's version, one place for the three binaries'
 * --version and the gpuheal_build_info metric. Keep it equal to the Helm
 * chart's appVersion (deploy/helm/gpuheal/Chart.yaml) and python/pyproject.toml:
 * test/cli/versions.sh checks that. */
#ifndef GH_COMMON_VERSION_H
#define GH_COMMON_VERSION_H

#define GH_VERSION "0.1.0"

#endif
