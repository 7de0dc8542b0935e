/*
 * transport_tls.c — a fixed transport workload for instruction counts (valgrind --tool=callgrind):
 *   transport_tls courier|curl N URL CA_FILE
 * Runs N GETs of URL, 32 in flight after 200 warm-up requests, through the Courier C API
 * (cbench_courier_c) or the plain libcurl multi loop that sends the same headers
 * (cbench_curl_multi_headers), both given CA_FILE and multiplexing as `courier bench transport
 * --tls/--h2` gives them. Run with two values of N; (Ir(N2) - Ir(N1)) / (N2 - N1) is one request.
 */
#include <cbench.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 5 || (strcmp(argv[1], "courier") != 0 && strcmp(argv[1], "curl") != 0)) {
        fprintf(stderr, "usage: transport_tls courier|curl N URL CA_FILE\n");
        return 2;
    }
    long n = atol(argv[2]);
    cbench_transport_options o = {.ca_file = argv[4], .multiplex = 1};
    cbench_result r;
    int rc = strcmp(argv[1], "courier") == 0 ? cbench_courier_c(argv[3], n, 32, 200, &o, &r)
                                             : cbench_curl_multi_headers(argv[3], n, 32, 200, &o, &r);
    if (rc != 0 || r.errors) {
        fprintf(stderr, "transport_tls: rc %d, %ld errors: %s\n", rc, r.errors, r.first_error);
        return 1;
    }
    printf("completed %ld connections %ld http_version %d\n", r.completed, r.connections, r.http_version);
    return 0;
}
