/*
 * netwatch.c — what the operating system says about the network path, for the monitor (monitor.c):
 * online or offline, and the kind of the path (wired, Wi-Fi, cellular, other) and whether it is
 * expensive. Below the monitor: it reports through the function the monitor hands cr_netwatch_start
 * (cr_monitor_report), never naming it.
 *
 * Linux: a NETLINK_ROUTE socket subscribed to link and route changes; on each change (and at
 * start) the interface of the default route is looked up (an RTM_GETROUTE dump), its link read
 * (an RTM_GETLINK dump: ARPHRD type and flags) and told apart as the kernel reports it:
 * /sys/class/net/IF/wireless or phy80211 is Wi-Fi, DEVTYPE=wwan (uevent) or a raw-IP link is
 * cellular (expensive), Ethernet is wired, the rest (loopback, tunnels) other. No default route is
 * offline. Darwin: Network.framework's path monitor (not compiled on Linux). Elsewhere: nothing.
 */
#include "internal.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

#if defined(__linux__)
#include <fcntl.h>
#include <net/if_arp.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>
#include <sys/stat.h>

/* Sends a dump request of `type` for `family` and calls `each` for every message of the answer. */
static int nl_dump(int fd, int type, int family, void (*each)(struct nlmsghdr *h, void *ctx), void *ctx) {
    struct {
        struct nlmsghdr h;
        struct rtgenmsg g;
    } req;
    memset(&req, 0, sizeof req);
    req.h.nlmsg_len = NLMSG_LENGTH(sizeof req.g);
    req.h.nlmsg_type = (unsigned short)type;
    req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    req.h.nlmsg_seq = 1;
    req.g.rtgen_family = (unsigned char)family;
    struct sockaddr_nl to = {.nl_family = AF_NETLINK};
    if (sendto(fd, &req, req.h.nlmsg_len, 0, (struct sockaddr *)&to, sizeof to) < 0) return -1;
    char buf[16384];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (unsigned)n); h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_type == NLMSG_DONE) return 0;
            if (h->nlmsg_type == NLMSG_ERROR) return -1;
            each(h, ctx);
        }
    }
}

static int nl_socket(unsigned groups) {
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) return -1;
    struct sockaddr_nl addr = {.nl_family = AF_NETLINK, .nl_groups = groups};
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

struct route_ctx { int ifindex; };

static void on_route(struct nlmsghdr *h, void *ctx) {
    struct route_ctx *c = ctx;
    if (h->nlmsg_type != RTM_NEWROUTE || c->ifindex) return;
    struct rtmsg *rt = NLMSG_DATA(h);
    if (rt->rtm_dst_len != 0 || rt->rtm_table != RT_TABLE_MAIN || rt->rtm_type != RTN_UNICAST) return;
    int len = (int)RTM_PAYLOAD(h);
    for (struct rtattr *a = RTM_RTA(rt); RTA_OK(a, len); a = RTA_NEXT(a, len))
        if (a->rta_type == RTA_OIF) c->ifindex = *(int *)RTA_DATA(a);
}

struct link_ctx {
    int ifindex;        /* wanted by index (0: by name) */
    const char *name;   /* wanted by name */
    int found;
    unsigned short type; /* ARPHRD_* */
    unsigned flags;
    char ifname[IF_NAMESIZE + 1];
};

static void on_link(struct nlmsghdr *h, void *ctx) {
    struct link_ctx *c = ctx;
    if (h->nlmsg_type != RTM_NEWLINK || c->found) return;
    struct ifinfomsg *ifi = NLMSG_DATA(h);
    char name[IF_NAMESIZE + 1] = "";
    int len = (int)IFLA_PAYLOAD(h);
    for (struct rtattr *a = IFLA_RTA(ifi); RTA_OK(a, len); a = RTA_NEXT(a, len))
        if (a->rta_type == IFLA_IFNAME) snprintf(name, sizeof name, "%s", (const char *)RTA_DATA(a));
    if (c->ifindex ? ifi->ifi_index != c->ifindex : strcmp(name, c->name) != 0) return;
    c->found = 1;
    c->type = ifi->ifi_type;
    c->flags = ifi->ifi_flags;
    memcpy(c->ifname, name, sizeof name);
}

static bool sys_has(const char *ifname, const char *leaf) {
    char path[128];
    struct stat st;
    snprintf(path, sizeof path, "/sys/class/net/%s/%s", ifname, leaf);
    return stat(path, &st) == 0;
}

static bool sys_uevent_wwan(const char *ifname) {
    char path[128], line[128];
    snprintf(path, sizeof path, "/sys/class/net/%s/uevent", ifname);
    FILE *f = fopen(path, "re");
    if (!f) return false;
    bool wwan = false;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "DEVTYPE=wwan", 12) == 0) wwan = true;
    fclose(f);
    return wwan;
}

/* The kind of a link as the kernel reports it. */
static courier_network_kind classify(const struct link_ctx *l, int *expensive) {
    *expensive = 0;
    if (l->type == ARPHRD_LOOPBACK || (l->flags & IFF_LOOPBACK)) return COURIER_NETWORK_OTHER;
    if (sys_has(l->ifname, "wireless") || sys_has(l->ifname, "phy80211")) return COURIER_NETWORK_WIFI;
#ifndef ARPHRD_RAWIP
#define ARPHRD_RAWIP 519
#endif
    if (sys_uevent_wwan(l->ifname) || l->type == ARPHRD_RAWIP) {
        *expensive = 1;
        return COURIER_NETWORK_CELLULAR;
    }
    if (l->type == ARPHRD_ETHER) return COURIER_NETWORK_WIRED;
    return COURIER_NETWORK_OTHER;
}

int courier_network_link_kind(courier_network_kind *out_kind, int *out_expensive, const char *interface,
                              courier_error *err) {
    if (out_kind) *out_kind = COURIER_NETWORK_UNKNOWN;
    if (out_expensive) *out_expensive = 0;
    if (!out_kind || !interface || !*interface || strlen(interface) > IF_NAMESIZE)
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, NULL);
    int fd = nl_socket(0);
    if (fd < 0) {
        int e = errno;
        int rc = cr_fail(err, COURIER_E_INTERNAL, "netlink: %s", strerror(e));
        if (err) err->os_error = e;
        return rc;
    }
    struct link_ctx l = {.name = interface};
    int r = nl_dump(fd, RTM_GETLINK, AF_UNSPEC, on_link, &l);
    close(fd);
    if (r < 0) return cr_fail(err, COURIER_E_INTERNAL, "netlink: the link dump failed");
    if (!l.found) return cr_fail(err, COURIER_E_NOT_FOUND, "no network interface '%s'", interface);
    int expensive = 0;
    *out_kind = classify(&l, &expensive);
    if (out_expensive) *out_expensive = expensive;
    cr_error_clear(err);
    return COURIER_OK;
}

/* The path now: the default route's link (IPv4, else IPv6). */
static void read_path(int *status, courier_network_kind *kind, int *expensive) {
    *status = COURIER_REACHABILITY_OFFLINE;
    *kind = COURIER_NETWORK_UNKNOWN;
    *expensive = 0;
    int fd = nl_socket(0);
    if (fd < 0) {
        *status = COURIER_REACHABILITY_UNKNOWN;
        return;
    }
    struct route_ctx rc = {0};
    if (nl_dump(fd, RTM_GETROUTE, AF_INET, on_route, &rc) < 0) *status = COURIER_REACHABILITY_UNKNOWN;
    if (!rc.ifindex) nl_dump(fd, RTM_GETROUTE, AF_INET6, on_route, &rc);
    if (rc.ifindex) {
        struct link_ctx l = {.ifindex = rc.ifindex};
        if (nl_dump(fd, RTM_GETLINK, AF_UNSPEC, on_link, &l) == 0 && l.found) {
            *status = (l.flags & IFF_UP) ? COURIER_REACHABILITY_ONLINE : COURIER_REACHABILITY_OFFLINE;
            *kind = classify(&l, expensive);
        }
    }
    close(fd);
}

struct cr_netwatch {
    courier_engine *e;
    cr_netwatch_report_fn report; /* the monitor's (cr_monitor_report) */
    pthread_t thread;
    int fd;      /* the subscribed netlink socket */
    int stop[2]; /* a pipe: a byte written stops the thread */
};

static void *watch_main(void *arg) {
    struct cr_netwatch *w = arg;
    cr_thread_set_name("courier-net");
    for (bool changed = true;;) {
        if (changed) {
            int status, expensive;
            courier_network_kind kind;
            read_path(&status, &kind, &expensive);
            w->report(w->e, status, kind, expensive);
            changed = false;
        }
        struct pollfd p[2] = {{.fd = w->fd, .events = POLLIN}, {.fd = w->stop[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0 && errno != EINTR) break;
        if (p[1].revents) break;
        if (p[0].revents) {
            char buf[8192];
            while (recv(w->fd, buf, sizeof buf, MSG_DONTWAIT) > 0) changed = true; /* any change: read again */
        }
    }
    return NULL;
}

struct cr_netwatch *cr_netwatch_start(courier_engine *e, cr_netwatch_report_fn report) {
    struct cr_netwatch *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->e = e;
    w->report = report;
    w->fd = nl_socket(RTMGRP_LINK | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE);
    if (w->fd < 0 || pipe2(w->stop, O_CLOEXEC) != 0) {
        if (w->fd >= 0) close(w->fd);
        free(w);
        return NULL;
    }
    if (pthread_create(&w->thread, NULL, watch_main, w) != 0) {
        close(w->fd);
        close(w->stop[0]);
        close(w->stop[1]);
        free(w);
        return NULL;
    }
    return w;
}

void cr_netwatch_stop(struct cr_netwatch *w) {
    if (!w) return;
    ssize_t n;
    do n = write(w->stop[1], "x", 1);
    while (n < 0 && errno == EINTR);
    pthread_join(w->thread, NULL);
    close(w->fd);
    close(w->stop[0]);
    close(w->stop[1]);
    free(w);
}

#elif defined(__APPLE__)
#include <Network/Network.h>

/* Darwin: Network.framework's path monitor on a private queue reports every path change. */
struct cr_netwatch { nw_path_monitor_t monitor; };

struct cr_netwatch *cr_netwatch_start(courier_engine *e, cr_netwatch_report_fn report) {
    struct cr_netwatch *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->monitor = nw_path_monitor_create();
    nw_path_monitor_set_queue(w->monitor, dispatch_queue_create("courier.netwatch", DISPATCH_QUEUE_SERIAL));
    nw_path_monitor_set_update_handler(w->monitor, ^(nw_path_t path) {
        int online = nw_path_get_status(path) == nw_path_status_satisfied;
        courier_network_kind kind = nw_path_uses_interface_type(path, nw_interface_type_wifi) ? COURIER_NETWORK_WIFI
                                    : nw_path_uses_interface_type(path, nw_interface_type_cellular) ? COURIER_NETWORK_CELLULAR
                                    : nw_path_uses_interface_type(path, nw_interface_type_wired) ? COURIER_NETWORK_WIRED
                                    : online ? COURIER_NETWORK_OTHER : COURIER_NETWORK_UNKNOWN;
        report(e, online ? COURIER_REACHABILITY_ONLINE : COURIER_REACHABILITY_OFFLINE, kind,
                          nw_path_is_expensive(path) ? 1 : 0);
    });
    nw_path_monitor_start(w->monitor);
    return w;
}

void cr_netwatch_stop(struct cr_netwatch *w) {
    if (!w) return;
    nw_path_monitor_cancel(w->monitor); /* no handler runs after the cancel handler */
    free(w);
}

int courier_network_link_kind(courier_network_kind *out_kind, int *out_expensive, const char *interface,
                              courier_error *err) {
    if (out_kind) *out_kind = COURIER_NETWORK_UNKNOWN;
    if (out_expensive) *out_expensive = 0;
    (void)interface;
    return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "links are read on Linux only");
}

#else
struct cr_netwatch *cr_netwatch_start(courier_engine *e, cr_netwatch_report_fn report) {
    (void)e;
    (void)report;
    return NULL;
}
void cr_netwatch_stop(struct cr_netwatch *w) { (void)w; }
int courier_network_link_kind(courier_network_kind *out_kind, int *out_expensive, const char *interface,
                              courier_error *err) {
    if (out_kind) *out_kind = COURIER_NETWORK_UNKNOWN;
    if (out_expensive) *out_expensive = 0;
    (void)interface;
    return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "links are read on Linux only");
}
#endif
