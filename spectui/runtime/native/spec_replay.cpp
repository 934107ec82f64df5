// spectui-spec-replay: how llama-server settings would draft over token streams already known.
//
// Under greedy decoding a speculative setting's output is the target's own, so the tokens an AR
// run produced are the tokens every setting produces, and what an n-gram drafter proposes at each
// step depends on those tokens alone. This program drives llama.cpp's own drafters (common/
// speculative.cpp, the code llama-server links) over such streams, calling them as llama-server's
// slot loop does (tools/server/server-context.cpp: begin after the prompt, a draft of at most
// min(n_ctx - tokens - 2, n_remaining - 1), the longest agreeing prefix accepted), and reports
// each request's passes, drafted and accepted tokens. No model is loaded: drafters that need one
// (draft-simple, eagle3, mtp, dflash) are refused, and spectui measures those by running them.
//
// stdin, one JSON object:
//   {"n_ctx": 4096,
//    "configs": [["--spec-type", "ngram-mod", "--spec-ngram-mod-n-match", "8"], ...],
//    "streams": [[{"prompt": [ids], "output": [ids], "n_predict": 128, "eos": true}, ...], ...]}
// one stream per client slot (its requests in order; the slots step in lockstep, as a server's
// batch holds them). "eos": the output ended on an end-of-generation token, which the server
// sampled after one more (drafted) pass.
// stdout, one JSON object: {"results": [[{"passes": P, "drafted": D, "accepted": A,
// "sizes": [per pass, tokens drafted]}, ... per request, streams in order], ... per config]}
// or {"error": "..."} with exit 1.

#include "arg.h"
#include "common.h"
#include "speculative.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

using json = nlohmann::ordered_json;

struct request_in {
    llama_tokens prompt;
    llama_tokens output;
    int n_predict = -1;
    bool eos = false;
};

struct request_out {
    int passes = 0;
    int drafted = 0;
    int accepted = 0;
    std::vector<int> sizes;
};

// one slot working through its stream of requests
struct slot_state {
    const std::vector<request_in> * requests = nullptr;
    size_t next = 0;     // the next request to start
    int current = -1;    // the request in flight (-1: none)
    size_t i = 0;        // output[i] is the token just sampled (id_last)
    llama_tokens tokens; // prompt + output[0..i) : what the target has evaluated
    llama_tokens draft;
    std::vector<request_out> out;
};

static bool parse_config(const std::vector<std::string> & flags, common_params & params) {
    std::vector<std::string> args = {"spectui-spec-replay"};
    args.insert(args.end(), flags.begin(), flags.end());
    std::vector<char *> argv;
    for (auto & a : args) {
        argv.push_back(a.data());
    }
    return common_params_parse((int) argv.size(), argv.data(), params, LLAMA_EXAMPLE_SERVER);
}

// the token the stream holds after output[i] (the end-of-generation token is -1: it matches no draft)
static llama_token after(const request_in & r, size_t j) {
    return j < r.output.size() ? r.output[j] : -1;
}

static std::vector<std::vector<request_out>> replay(common_params & params, const std::vector<std::vector<request_in>> & streams,
                                                    int n_ctx) {
    const uint32_t n_seq = (uint32_t) streams.size();
    common_speculative_ptr spec(common_speculative_init(params.speculative, n_seq));
    std::vector<slot_state> slots(n_seq);
    for (uint32_t s = 0; s < n_seq; ++s) {
        slots[s].requests = &streams[s];
    }
    auto start = [&](slot_state & sl, llama_seq_id seq) {
        while (sl.next < sl.requests->size() && (*sl.requests)[sl.next].output.empty()) {
            sl.out.push_back({});  // nothing generated: nothing to replay
            sl.next++;
        }
        if (sl.next >= sl.requests->size()) {
            sl.current = -1;
            return;
        }
        sl.current = (int) sl.next++;
        const auto & r = (*sl.requests)[sl.current];
        sl.tokens = r.prompt;
        sl.i = 0;
        sl.out.push_back({});
        common_speculative_begin(spec.get(), seq, sl.tokens);
    };
    for (uint32_t s = 0; s < n_seq; ++s) {
        start(slots[s], (llama_seq_id) s);
    }
    for (;;) {
        bool any = false;
        std::vector<bool> drafting(n_seq, false);
        for (uint32_t s = 0; s < n_seq; ++s) {
            auto & sl = slots[s];
            if (sl.current < 0) {
                continue;
            }
            any = true;
            const auto & r = (*sl.requests)[sl.current];
            auto & dp = common_speculative_get_draft_params(spec.get(), (llama_seq_id) s);
            dp.drafting = false;
            const int n_gen = (int) sl.i + 1;
            int n_draft_max = n_ctx - (int) sl.tokens.size() - 2;
            if (r.n_predict >= 0) {
                n_draft_max = std::min(n_draft_max, r.n_predict - n_gen - 1);
            }
            sl.draft.clear();
            if (n_draft_max > 0) {
                dp = {true, n_draft_max, (llama_pos) sl.tokens.size(), r.output[sl.i], &sl.tokens, &sl.draft};
                drafting[s] = true;
            }
        }
        if (!any) {
            break;
        }
        common_speculative_draft(spec.get());
        for (uint32_t s = 0; s < n_seq; ++s) {
            auto & sl = slots[s];
            if (sl.current < 0) {
                continue;
            }
            const auto & r = (*sl.requests)[sl.current];
            auto & o = sl.out.back();
            int n_acc = 0;
            if (drafting[s] && !sl.draft.empty()) {
                while (n_acc < (int) sl.draft.size() && sl.draft[n_acc] == after(r, sl.i + 1 + n_acc)) {
                    n_acc++;
                }
                common_speculative_accept(spec.get(), (llama_seq_id) s, (uint16_t) n_acc);
                o.drafted += (int) sl.draft.size();
                o.accepted += n_acc;
            }
            o.passes++;
            o.sizes.push_back((int) sl.draft.size());
            // the target evaluated id_last and the accepted tokens; the token after them is sampled
            for (int k = 0; k <= n_acc; ++k) {
                sl.tokens.push_back(r.output[sl.i + k]);
            }
            sl.i += n_acc + 1;
            const size_t last = r.output.size() - 1 + (r.eos ? 1 : 0);  // the end token is sampled too
            const bool budget_left = r.n_predict < 0 || (int) sl.i + 1 < r.n_predict;
            if (sl.i >= last || !budget_left || sl.i >= r.output.size()) {
                start(sl, (llama_seq_id) s);
            }
        }
    }
    std::vector<std::vector<request_out>> out;
    for (auto & sl : slots) {
        out.push_back(std::move(sl.out));
    }
    return out;
}

int main() {
    json in;
    try {
        in = json::parse(std::cin);
    } catch (const std::exception & e) {
        std::cout << json{{"error", std::string("not JSON: ") + e.what()}}.dump() << std::endl;
        return 1;
    }
    std::vector<std::vector<request_in>> streams;
    for (const auto & stream : in.at("streams")) {
        std::vector<request_in> reqs;
        for (const auto & r : stream) {
            request_in q;
            q.prompt = r.at("prompt").get<llama_tokens>();
            q.output = r.at("output").get<llama_tokens>();
            q.n_predict = r.value("n_predict", -1);
            q.eos = r.value("eos", false);
            reqs.push_back(std::move(q));
        }
        streams.push_back(std::move(reqs));
    }
    const int n_ctx = in.value("n_ctx", 4096);
    json results = json::array();
    for (const auto & flags : in.at("configs")) {
        common_params params;
        if (!parse_config(flags.get<std::vector<std::string>>(), params)) {
            std::cout << json{{"error", "llama.cpp did not take these flags: " + flags.dump()}}.dump() << std::endl;
            return 1;
        }
        for (auto t : params.speculative.types) {
            if (t != COMMON_SPECULATIVE_TYPE_NONE && t < COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE) {
                std::cout << json{{"error", "needs a model to draft: " + common_speculative_type_to_str(t)}}.dump() << std::endl;
                return 1;
            }
        }
        json per = json::array();
        for (const auto & stream : replay(params, streams, n_ctx)) {
            for (const auto & o : stream) {
                per.push_back({{"passes", o.passes}, {"drafted", o.drafted}, {"accepted", o.accepted}, {"sizes", o.sizes}});
            }
        }
        results.push_back(per);
    }
    std::cout << json{{"results", results}}.dump() << std::endl;
    return 0;
}
